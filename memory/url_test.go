package memory_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
)

func TestOpenURLRejects(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"mem://election#1", `fragment "#1"`},
		{"mem://election/a#b", `fragment "#b"`},
		{"mem://u@election", `user information "u@": mem URLs take no user name or password`},
		{"mem://u:s3cret@election", `user information "u:xxxxx@"`},
	} {
		t.Run(tc.url, func(t *testing.T) {
			d, err := leaderelection.OpenDecider(t.Context(), tc.url)
			if err == nil {
				t.Fatalf("OpenDecider(%q) = %v, nil; want an error saying %q", tc.url, d, tc.want)
			}
			if !errors.Is(err, leaderelection.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenDecider(%q) = %v; want an ErrBadURL saying %q", tc.url, err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestOpenURLAccepts(t *testing.T) {
	for _, raw := range []string{"mem://url-test-election", "mem://url-test/a%23b", "mem://url-test-x?"} {
		d, err := leaderelection.OpenDecider(t.Context(), raw)
		if err != nil {
			t.Errorf("OpenDecider(%q): %v", raw, err)
			continue
		}
		want := strings.TrimSuffix(strings.ReplaceAll(raw, "%23", "#"), "?")
		if got := fmt.Sprint(d); got != want {
			t.Errorf("OpenDecider(%q) opened %q, want %q", raw, got, want)
		}
	}
}
