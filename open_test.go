package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
	"github.com/racedecider/leaderelection/memory"
)

// uniq makes names unique per test run, since schemes and mem:// names live
// as long as the process (go test -count=N runs tests again in it).
var uniq atomic.Int64

func TestOpenDeciderMemorySharesByName(t *testing.T) {
	ctx := t.Context()
	n := uniq.Add(1)
	a, err := leaderelection.OpenDecider(ctx, fmt.Sprintf("mem://open-test-shared-%d", n))
	if err != nil {
		t.Fatal(err)
	}
	b, err := leaderelection.OpenDecider(ctx, fmt.Sprintf("MEM://open-test-shared-%d", n))
	if err != nil {
		t.Fatal(err)
	}
	other, err := leaderelection.OpenDecider(ctx, fmt.Sprintf("mem://open-test-other-%d", n))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(*memory.Decider); !ok {
		t.Fatalf("mem:// opened a %T", a)
	}
	// The engine names the store by its String in errors, logs and metrics.
	if got, want := fmt.Sprint(a), fmt.Sprintf("mem://open-test-shared-%d", n); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := fmt.Sprint(memory.NewDecider()); got != "memory" {
		t.Errorf("NewDecider().String() = %q, want memory", got)
	}
	e := &entry.RaceEntry{LeaderID: "x", WriteID: "w"}
	if _, err := a.WriteEntry(ctx, e); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadCurrent(ctx); err != nil || got.WriteID != "w" {
		t.Errorf("second opener of the same name reads %+v, %v; want the first's write", got, err)
	}
	if got, err := other.ReadCurrent(ctx); err != nil || got.ElectionNumber != entry.NoElections {
		t.Errorf("another name reads %+v, %v; want an empty election", got, err)
	}
}

func TestOpenDeciderFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	for _, raw := range []string{"file://" + path, "file://localhost" + path} {
		d, err := leaderelection.OpenDecider(t.Context(), raw)
		if err != nil {
			t.Fatalf("OpenDecider(%q): %v", raw, err)
		}
		fd, ok := d.(*file.Decider)
		if !ok {
			t.Fatalf("OpenDecider(%q) opened a %T", raw, d)
		}
		if want, _ := filepath.EvalSymlinks(filepath.Dir(path)); fd.Path() != filepath.Join(want, "record") {
			t.Errorf("OpenDecider(%q) opened %s", raw, fd.Path())
		}
	}
}

func TestOpenDeciderErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		url  string
		want []string // substrings of the error
		bad  bool     // wraps ErrBadURL
	}{
		{"nope://x", []string{`unknown scheme "nope"`, "file:///PATH", "mem://NAME"}, true},
		{"/just/a/path", []string{"no scheme", "file:///PATH"}, true},
		{"gs://bucket/object", []string{`unknown scheme "gs"`, `import _ "github.com/racedecider/leaderelection/gcs"`}, true},
		{"mem://x?region=1&a=2", []string{"unknown query parameters a, region", "mem URLs accept: none"}, true},
		{"mem://", []string{"no election name", "mem://NAME"}, true},
		{"file:relative/path", []string{"not an absolute path"}, true},
		{"file://otherhost/x", []string{`host "otherhost"`}, true},
		{"file:///", []string{"no path"}, true},
		{"file://" + dir + "/", []string{"names a directory"}, true},
		{"file://" + dir + "/missing/record", []string{"no such file or directory"}, false},
		{"mem://x\x7f", []string{"invalid control character"}, true},
		// Passwords stay out of errors, whether the URL parses or not.
		{"mem://u:s3cret@x?password=s3cret", []string{`"mem://u:xxxxx@x?password=xxxxx"`, "unknown query parameter password"}, true},
		{"mem://u:s3 cret@x", []string{`"mem://(not shown: it does not parse)"`, "invalid userinfo", "percent-encoded"}, true},
		// A '#', '/' or '?' cuts the password into the host, whose
		// parse error quoted it.
		{"postgres://app:s3cret#tail@db.internal:5432/app", []string{`"postgres://(not shown: it does not parse)"`, "it does not parse", "'#' as %23"}, true},
		{"postgres://app:s3cret/x@db.internal/app", []string{"it does not parse", "'#' as %23"}, true},
		{"postgres://app:s3cret?x@db.internal/app", []string{"it does not parse"}, true},
		// A password whose first part is digits makes a port: the URL
		// parses, but is not what its user meant.
		{"postgres://app:1234?s3cret@db.internal/app?table=t&election=e", []string{"(not shown: user information cut by a '/' or '?')", "'#' as %23"}, true},
		{"mem://app:1234/s3cret@x", []string{"(not shown: user information cut by a '/' or '?')"}, true},
		{"mem://app:12#s3cret@x", []string{"(not shown: user information cut by a '#')", "'#' as %23"}, true},
		// A bad escape in a value: net/url's error quoted it, and the
		// two characters after the '%'.
		{"mem://x?password=s3%zzcret", []string{`query: the value of "password" has a bad %-escape`, "%25"}, true},
		{"mem://x?a=1;b=2", []string{"query: a ';' separates parameters"}, true},
		// A '#' anywhere is refused, even with nothing after it, which
		// net/url drops without a trace (this opened the record
		// "record"), and the fragment is not shown where it may be the
		// rest of a secret.
		{"file://" + dir + "/record#", []string{"a '#' with nothing after it", "%23"}, true},
		{"mem://x#", []string{"a '#' with nothing after it"}, true},
		{"mem://x#1", []string{`fragment "#1"`, "%23"}, true},
		{"mem://x?password=ab#s3cret", []string{"a fragment (#...) after the query", "%23"}, true},
		{"nope://x#1", []string{`unknown scheme "nope"`}, true},
		// The values of parameters the scheme does not accept are not
		// shown (they may be keys: account_key, sas, pwd); their names
		// are.
		{"mem://x?account_key=s3cret&pwd=s3cret", []string{`"mem://x?account_key=xxxxx&pwd=xxxxx"`, "unknown query parameters account_key, pwd"}, true},
		{"nope://x?pwd=s3cret", []string{`"nope://x?pwd=xxxxx"`, `unknown scheme "nope"`}, true},
	} {
		_, err := leaderelection.OpenDecider(t.Context(), tc.url)
		if err == nil {
			t.Errorf("OpenDecider(%q) succeeded", tc.url)
			continue
		}
		if strings.Contains(err.Error(), "cret") || strings.Contains(err.Error(), "zz") {
			t.Errorf("OpenDecider(%q) error %q shows the password", tc.url, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("OpenDecider(%q) error %q does not contain %q", tc.url, err, w)
			}
		}
		if got := errors.Is(err, leaderelection.ErrBadURL); got != tc.bad {
			t.Errorf("OpenDecider(%q) error %q: errors.Is(ErrBadURL) = %v, want %v", tc.url, err, got, tc.bad)
		}
	}
}

func TestRegisterSchemeParams(t *testing.T) {
	var opened *url.URL
	scheme := fmt.Sprintf("open-test%d", uniq.Add(1))
	leaderelection.RegisterScheme(scheme, leaderelection.URLOpener{
		Open: func(_ context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
			opened = u
			return memory.NewDecider(), nil
		},
		Params: []string{"region", "endpoint"},
		Form:   "open-test://BUCKET?region=R",
	})
	if _, err := leaderelection.OpenDecider(t.Context(), scheme+"://b/k?region=x&endpoint=y"); err != nil {
		t.Fatal(err)
	}
	if opened.Query().Get("region") != "x" || opened.Host != "b" {
		t.Errorf("opener got %v", opened)
	}
	_, err := leaderelection.OpenDecider(t.Context(), scheme+"://b/k?regoin=x")
	if err == nil || !strings.Contains(err.Error(), "unknown query parameter regoin; "+scheme+" URLs accept: region, endpoint") {
		t.Errorf("misspelt parameter: %v", err)
	}
	// A parameter the scheme does not accept shows its name, not its
	// value; one it accepts that is a URL shows it without its secrets.
	_, err = leaderelection.OpenDecider(t.Context(), scheme+"://b/k?endpoint=https%3A%2F%2Fh%2F%3Fsv%3D1%26sig%3Ds3cret&sas=sv%3D1%26sig%3Ds3cret")
	if err == nil || !strings.Contains(err.Error(), "://b/k?endpoint=https%3A%2F%2Fh%2F%3Fsv%3D1%26sig%3Dxxxxx&sas=xxxxx") ||
		!strings.Contains(err.Error(), "unknown query parameter sas;") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("unknown parameter with a secret value: %v", err)
	}
	if !strings.Contains(strings.Join(leaderelection.Schemes(), " "), "open-test://BUCKET?region=R") {
		t.Errorf("Schemes() = %q", leaderelection.Schemes())
	}

	for name, reg := range map[string]func(){
		"duplicate": func() {
			leaderelection.RegisterScheme("mem", leaderelection.URLOpener{Open: func(context.Context, *url.URL) (leaderelection.RaceDecider, error) { return nil, nil }})
		},
		"empty":    func() { leaderelection.RegisterScheme("", leaderelection.URLOpener{}) },
		"nil Open": func() { leaderelection.RegisterScheme("open-test-nil", leaderelection.URLOpener{}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterScheme (%s) did not panic", name)
				}
			}()
			reg()
		}()
	}
}

// Opens an election by URL. The blank (or, here, named) import of a backend
// package registers its scheme.
func ExampleOpenDecider() {
	ctx := context.Background()
	// mem://NAME needs the memory package; file:///PATH the file package,
	// gs://BUCKET/OBJECT the gcs package, s3://BUCKET/KEY the s3 package.
	d, err := leaderelection.OpenDecider(ctx, "mem://example")
	if err != nil {
		fmt.Println(err)
		return
	}
	rec, err := d.ReadCurrent(ctx)
	fmt.Println(rec.ElectionNumber == entry.NoElections, err)

	_, err = leaderelection.OpenDecider(ctx, "mem://example?timeout=1s")
	fmt.Println(err)
	// Output:
	// true <nil>
	// leaderelection: OpenDecider("mem://example?timeout=xxxxx"): bad store URL: unknown query parameter timeout; mem URLs accept: none
}
