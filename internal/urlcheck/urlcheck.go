// Package urlcheck holds the checks every store URL opener makes of the
// parts of a URL that leaderelection.OpenDecider's own check (the scheme, and
// no query parameter outside the opener's list) leaves to it, so that the
// openers refuse the same mistakes with the same words. Its errors never
// show a password; the openers wrap them with leaderelection.ErrBadURL.
package urlcheck

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/racedecider/leaderelection/internal/redact"
)

// Check returns an error for the first of these that u carries: user
// information; a fragment, which would otherwise be dropped from the name
// it ends (write a '#' in a name as %23); a NUL byte (%00) in the host or
// path, which no store's name may hold and which a file name would fail on
// only when opened; a query parameter given more than once, of which an
// opener would read only the first; a query parameter given with an empty
// value ("?endpoint=", as an unset shell variable leaves it), which an
// opener would otherwise take for one not given and fall back to its
// default. It is for schemes whose URLs carry no user information: every
// store's but PostgreSQL's.
func Check(u *url.URL) error {
	if u.User != nil {
		shown := url.User(u.User.Username())
		if _, ok := u.User.Password(); ok {
			shown = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return fmt.Errorf("user information %q: %s URLs take no user name or password",
			shown.String()+"@", strings.ToLower(u.Scheme))
	}
	if u.Fragment != "" {
		return fragment(u, nil)
	}
	if err := nul(u); err != nil {
		return err
	}
	return query(u)
}

// CheckWithUser is Check for a scheme whose URLs carry user information
// (postgres://USER:PASSWORD@HOST): it allows it, and does not show the
// fragment, since an unescaped '#' in a password starts one.
func CheckWithUser(u *url.URL) error {
	if u.Fragment != "" {
		return errors.New(fragmentInUser)
	}
	if err := nul(u); err != nil {
		return err
	}
	return query(u)
}

// Fragment returns an error if rawURL, which u was parsed from, holds a
// '#' anywhere: a store URL has no fragment, and net/url drops one that is
// empty (file:///tmp/rec# names /tmp/rec) without a trace in u, so that only
// the raw URL tells. leaderelection.OpenDecider calls it for every scheme;
// accepted says which query parameters the scheme accepts (nil: any), so
// that a fragment that may hold the rest of a value an unescaped '#' cut
// (account_key=ab#cd) is not shown.
func Fragment(rawURL string, u *url.URL, accepted func(name string) bool) error {
	if !strings.Contains(rawURL, "#") {
		return nil
	}
	return fragment(u, accepted)
}

// fragmentInUser is the error for a fragment in a URL that may carry a
// password: an unescaped '#' in it starts the fragment, which is not shown.
const fragmentInUser = "a fragment (#...): a store URL has none (write a '#' in a password or a name as %23)"

// fragment is the error for u, parsed from a URL holding a '#'. It shows the
// fragment only where it cannot be the rest of a secret (see
// redact.FragmentShown).
func fragment(u *url.URL, accepted func(name string) bool) error {
	switch {
	case u.Fragment == "":
		return errors.New("a '#' with nothing after it: a store URL has no fragment, and the '#' would be dropped without a word (write a '#' in a name or password as %23)")
	case u.User != nil:
		return errors.New(fragmentInUser)
	case !redact.FragmentShown(u, accepted):
		return errors.New("a fragment (#...) after the query: a store URL has none (write a '#' in a value or a name as %23)")
	}
	return fmt.Errorf("fragment %q: a store URL has none (write a '#' in a name as %%23)", "#"+u.Fragment)
}

// nul reports a NUL byte in u's host or path, which no store's names may
// hold (a file name with one fails only when it is opened, as if the store
// refused).
func nul(u *url.URL) error {
	if strings.ContainsRune(u.Host+u.Path+u.Opaque, 0) {
		return errors.New("a NUL byte (%00) in the host or path: no store name may hold one")
	}
	return nil
}

// query reports the parameters given more than once or with an empty
// value, by name only: a value may be a password.
func query(u *url.URL) error {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	var repeated, empty []string
	for k, vs := range q {
		if len(vs) > 1 {
			repeated = append(repeated, k)
		} else if vs[0] == "" {
			empty = append(empty, k)
		}
	}
	slices.Sort(repeated)
	slices.Sort(empty)
	switch {
	case len(repeated) == 1:
		return fmt.Errorf("query parameter %s is given %d times: give it once", repeated[0], len(q[repeated[0]]))
	case len(repeated) > 1:
		return fmt.Errorf("query parameters %s are each given more than once: give each once", strings.Join(repeated, ", "))
	case len(empty) == 1:
		return fmt.Errorf("query parameter %s is empty (%s=): give it a value or leave it out", empty[0], empty[0])
	case len(empty) > 1:
		return fmt.Errorf("query parameters %s are empty: give each a value or leave it out", strings.Join(empty, ", "))
	}
	return nil
}

// Endpoint checks the value of the query parameter param, the base URL of a
// service: http or https, with a host, and without user information (the
// credentials never come from it), a query (the SDKs' clients would fail
// every request on it) or a fragment. The error shows the value through
// redact.URL.
func Endpoint(param, raw string) (*url.URL, error) {
	e, err := url.Parse(raw)
	if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil || e.RawQuery != "" || e.ForceQuery || e.Fragment != "" {
		return nil, fmt.Errorf("%s=%q: want an http:// or https:// URL with a host and no user information, query or fragment",
			param, redact.URL(raw))
	}
	return e, nil
}

// Region checks the value of the query parameter region, an AWS region's
// name (us-east-1, generously), so that a value every request would fail on
// is a bad URL.
func Region(value string) error {
	if !region.MatchString(value) {
		return fmt.Errorf("region=%q: want an AWS region: lowercase letters and digits, in words joined by hyphens (us-east-1)", value)
	}
	return nil
}

var region = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
