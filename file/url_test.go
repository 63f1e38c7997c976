package file_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/file"
)

func TestOpenURLRejects(t *testing.T) {
	dir := filepath.ToSlash(t.TempDir())
	for _, tc := range []struct{ url, want string }{
		{"file://" + dir + "/rec#1", `fragment "#1"`},
		{"file://localhost" + dir + "/rec#a/b", `fragment "#a/b"`},
		{"file://user@localhost" + dir + "/rec", `user information "user@": file URLs take no user name or password`},
		{"file://u:s3cret@" + dir + "/rec", `user information "u:xxxxx@"`},
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
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for raw, path := range map[string]string{
		"file://" + filepath.ToSlash(dir) + "/rec":              filepath.Join(dir, "rec"),
		"file://localhost" + filepath.ToSlash(dir) + "/a%23b?":  filepath.Join(dir, "a#b"),
		"file://" + filepath.ToSlash(dir) + "/report%20sender#": filepath.Join(dir, "report sender"),
	} {
		d, err := leaderelection.OpenDecider(t.Context(), raw)
		if err != nil {
			t.Errorf("OpenDecider(%q): %v", raw, err)
			continue
		}
		if got := d.(*file.Decider).Path(); got != path {
			t.Errorf("OpenDecider(%q) opened %s, want %s", raw, got, path)
		}
	}
}
