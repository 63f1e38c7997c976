//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package file_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// asNobody runs f where file modes deny writes: only as a user other than
// root, who has no way here to give up its override for one thread.
func asNobody(t *testing.T, probe string, f func()) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("root ignores file modes, and setfsuid is Linux only")
	}
	p := filepath.Join(probe, "probe")
	if err := os.WriteFile(p, nil, 0o666); err == nil {
		_ = os.Remove(p)
		t.Skip("file modes do not deny writes here")
	}
	f()
}

func runMountsHelper(*testing.T, string) string {
	return "SKIP mount namespaces are Linux only"
}

func mountsHelper() { fmt.Println("SKIP mount namespaces are Linux only") }
