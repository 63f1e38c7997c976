package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestDemoInVirtualTime runs the demo with its default schedule in a synctest
// bubble, where its 20 seconds pass at once.
func TestDemoInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		ok, err := runDemo(t.Context(), &out, demoOptions{term: 4 * time.Second, skew: 500 * time.Millisecond, candidates: 3})
		if err != nil || !ok {
			t.Fatalf("runDemo = %v, %v\n%s", ok, err, &out)
		}
		text := out.String()
		// The shut-down leader's release may be replaced before the
		// watcher reads it, so its "released" line is not required.
		order := []string{"ELECTED", "PAUSES", "term ended", "took over", "REJECTS", "CRASHES", "took over", "restarts", "SHUTS DOWN", "took over", "released", "Summary"}
		rest := text
		for _, w := range order {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Fatalf("demo output lacks %q in the expected order:\n%s", w, text)
			}
			rest = rest[i+len(w):]
		}
		if !strings.Contains(text, "1 rejected") {
			t.Errorf("demo output does not report one rejected write:\n%s", text)
		}
		t.Logf("\n%s", text)
	})
}

func TestDemoWithTwoCandidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		if ok, err := runDemo(t.Context(), &out, demoOptions{term: time.Second, skew: 100 * time.Millisecond, candidates: 2}); err != nil || !ok {
			t.Fatalf("runDemo = %v, %v\n%s", ok, err, &out)
		}
	})
}

func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	record := "file://" + filepath.Join(dir, "record")
	corrupt := filepath.Join(dir, "corrupt")
	if err := os.WriteFile(corrupt, []byte("not a record"), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout []string
		stderr []string
	}{
		{name: "no command", code: exitUsage, stderr: []string{"Commands:", "demo"}},
		{name: "unknown command", args: []string{"elect"}, code: exitUsage, stderr: []string{`unknown command "elect"`}},
		{name: "help", args: []string{"--help"}, stdout: []string{"leaderelect demo", "s3://BUCKET/KEY", "127"}},
		{name: "help run", args: []string{"help", "run"}, stdout: []string{"LEADER_TERM", "--grace duration", "[$LEADERELECT_STORE]", "(default 15s)"}},
		{name: "run --help", args: []string{"run", "--help"}, stdout: []string{"LEADER_EXPIRY", "SIGKILL"}},
		{name: "status -h", args: []string{"status", "-h"}, stdout: []string{"released", "--json"}},
		{name: "bad flag", args: []string{"watch", "--polll=1s"}, code: exitUsage, stderr: []string{"polll", "leaderelect watch --help"}},
		{name: "no store", args: []string{"run", "--", "true"}, code: exitUsage, stderr: []string{"--store is required", "LEADERELECT_STORE"}},
		{name: "no command to run", args: []string{"run", "--store", record}, code: exitUsage, stderr: []string{"no COMMAND given"}},
		{name: "unknown scheme", args: []string{"status", "--store", "etcd://x/y"}, code: exitUsage,
			stderr: []string{`unknown scheme "etcd"`, "file:///PATH", "gs://BUCKET/OBJECT", "mem://NAME", "s3://BUCKET/KEY"}},
		{name: "unknown parameter", args: []string{"status", "--store", "mem://x?regoin=x"}, code: exitUsage,
			stderr: []string{"unknown query parameter regoin", "mem URLs accept: none"}},
		{name: "relative file", args: []string{"status", "--store", "file:record"}, code: exitUsage, stderr: []string{"absolute path"}},
		{name: "missing directory", args: []string{"status", "--store", "file://" + dir + "/missing/record"}, code: exitFailed,
			stderr: []string{"no such file or directory"}},
		{name: "corrupt record", args: []string{"status", "--store", "file://" + corrupt}, code: exitFailed,
			stderr: []string{"corrupt election record", corrupt}},
		{name: "run on a corrupt record", args: []string{"run", "--store", "file://" + corrupt, "--", "true"}, code: exitFailed,
			stderr: []string{"corrupt election record", corrupt}},
		{name: "grace too long", args: []string{"run", "--store", record, "--term=5s", "--grace=5s", "--", "true"}, code: exitUsage,
			stderr: []string{"--grace (5s) must be less than --term (5s) minus --skew (1s)"}},
		{name: "skew too large", args: []string{"run", "--store", record, "--term=1s", "--skew=500ms", "--grace=0s", "--", "true"}, code: exitUsage,
			stderr: []string{"--term (1s) must be greater than 2 x --skew (500ms)"}},
		{name: "command not found", args: []string{"run", "--store", record, "--", "/no/such/command"}, code: exitNotFound,
			stderr: []string{"/no/such/command"}},
		{name: "store from the environment", args: []string{"status"}, env: map[string]string{"LEADERELECT_STORE": record},
			stdout: []string{"none: no election has happened"}},
		{name: "flag wins over environment", args: []string{"status", "--store", record}, env: map[string]string{"LEADERELECT_STORE": "bad://"},
			stdout: []string{"none"}},
		{name: "bad environment value", args: []string{"status", "--store", record}, env: map[string]string{"LEADERELECT_JSON": "maybe"},
			code: exitUsage, stderr: []string{`LEADERELECT_JSON="maybe"`}},
		{name: "demo candidates", args: []string{"demo", "--candidates=1"}, code: exitUsage, stderr: []string{"--candidates (1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			o := dispatch(tc.args, &stdout, &stderr)
			if o.code != tc.code || o.signal != 0 {
				t.Errorf("exit %+v, want code %d\nstdout:\n%s\nstderr:\n%s", o, tc.code, &stdout, &stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, &stderr)
				}
			}
		})
	}
}

// TestStatusPermissionDenied reads a record this process may not read. Root
// may read any file, so as root the built binary runs as nobody instead.
func TestStatusPermissionDenied(t *testing.T) {
	dir := t.TempDir() // 0700, so nobody cannot even reach the record
	path := filepath.Join(dir, "record")
	if err := os.WriteFile(path, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	args := []string{"status", "--store", "file://" + path}
	if os.Geteuid() != 0 {
		var stdout, stderr bytes.Buffer
		o := dispatch(args, &stdout, &stderr)
		if o.code != exitFailed || !strings.Contains(stderr.String(), "permission denied") {
			t.Errorf("exit %+v, stderr %q; want %d and permission denied", o, &stderr, exitFailed)
		}
		return
	}
	// A copy of the binary that nobody may execute.
	binDir, err := os.MkdirTemp("", "leaderelect-nobody-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "leaderelect")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(stderr.String(), "permission denied") {
		t.Errorf("as nobody: %v, stderr %q; want exit %d and permission denied", err, &stderr, exitFailed)
	}
}
