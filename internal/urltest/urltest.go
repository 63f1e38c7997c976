// Package urltest checks, for the backends' tests, that OpenDecider refuses
// bad store URLs as it should.
package urltest

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
)

// Rejects checks that OpenDecider refuses each URL of cases with an error
// wrapping leaderelection.ErrBadURL that says what cases maps it to, and
// never shows secret (a password in a case's URL).
func Rejects(t *testing.T, secret string, cases map[string]string) {
	t.Helper()
	for _, raw := range slices.Sorted(maps.Keys(cases)) {
		want := cases[raw]
		t.Run(raw, func(t *testing.T) {
			d, err := leaderelection.OpenDecider(t.Context(), raw)
			if err == nil {
				t.Fatalf("OpenDecider(%q) = %v, nil; want an error saying %q", raw, d, want)
			}
			if !errors.Is(err, leaderelection.ErrBadURL) || !strings.Contains(err.Error(), want) {
				t.Errorf("OpenDecider(%q) = %v; want an ErrBadURL saying %q", raw, err, want)
			}
			if secret != "" && strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}
