// Package redact keeps secrets out of the store URLs that errors and command
// output show: a PostgreSQL URL may carry a password in its user information
// or as a query parameter.
package redact

import (
	"net/url"
	"strings"
)

// URL returns rawURL with its password and the values of its query
// parameters that carry secrets replaced by "xxxxx", the rest as given (and
// all of it as given when it has none). A query parameter's value that is
// itself a URL (endpoint=https://host/?sig=...) is shown as URL shows it. A
// fragment that may hold the rest of a password or a secret value cut by an
// unescaped '#' is shown as "#xxxxx" (see FragmentShown). A URL that does
// not parse, or whose user information is not where a URL keeps it, is
// shown as its scheme alone, since where its secrets are cannot be told.
func URL(rawURL string) string { return show(rawURL, nil) }

// Accepting is URL for a URL whose scheme accepts only the query parameters
// for which accepted reports true: it shows the value of any other
// parameter as "xxxxx" too, since a parameter its user meant for something
// else may carry a key or a token (account_key=..., sas=...). A nil
// accepted accepts none.
func Accepting(rawURL string, accepted func(name string) bool) string {
	if accepted == nil {
		accepted = func(string) bool { return false }
	}
	return show(rawURL, accepted)
}

// show is URL, and Accepting when accepted is not nil.
func show(rawURL string, accepted func(name string) bool) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		if scheme, _, ok := strings.Cut(rawURL, "://"); ok && !strings.ContainsAny(scheme, "@:/?") {
			return scheme + "://(not shown: it does not parse)"
		}
		return "(not shown: it does not parse)"
	}
	switch {
	case strings.Contains(u.Opaque, "@"):
		// A scheme without "//" (postgres:app:pw@db): what looks like
		// user information is not parsed as such.
		return u.Scheme + ":(not shown: user information without //)"
	case strings.Contains(u.Fragment, "@"):
		// A '#' in a password (postgres://app:p#w@db) cuts it in two:
		// the host shows the first part, the fragment the rest.
		return u.Scheme + "://" + Cut + " by a '#')"
	case u.User == nil && u.Port() != "" && strings.Contains(u.Path+u.RawQuery, "@"):
		// So does a '/' or '?' (postgres://app:12/w@db): the port
		// shows the first part, the path or query the rest.
		return u.Scheme + "://" + Cut + " by a '/' or '?')"
	}
	_, hidden := u.User.Password()
	if u.Fragment != "" && !FragmentShown(u, accepted) {
		u.Fragment, u.RawFragment, hidden = "xxxxx", "", true
	}
	if u.RawQuery != "" {
		// In place, so that the parameters keep their order and encoding.
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, v, ok := strings.Cut(p, "=")
			switch {
			case !ok:
			case Secret(k) || accepted != nil && !accepted(unescape(k)):
				parts[i] = k + "=xxxxx"
			default:
				// A URL as a value (endpoint=http://user:pw@host,
				// endpoint=https://acct.blob.core.windows.net/?sv=...&sig=...)
				// may carry a password or a token of its own.
				inner, err := url.QueryUnescape(v)
				if err != nil || !isURL(inner) {
					break
				}
				if shown := URL(inner); shown != inner || strings.Contains(inner, "@") {
					parts[i] = k + "=" + url.QueryEscape(shown)
				}
			}
			hidden = hidden || parts[i] != p
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if !hidden {
		// As given: the URL's own String re-encodes it ("not a url" as
		// "not%20a%20url") and drops an empty host's "//" ("mem://" as
		// "mem:").
		return rawURL
	}
	return u.Redacted()
}

// isURL reports whether a query parameter's value v may be a URL that
// carries a secret: it has user information, or it is an absolute URL (or
// would be one, but does not parse).
func isURL(v string) bool {
	if strings.Contains(v, "@") || strings.Contains(v, "://") {
		return true
	}
	u, err := url.Parse(v)
	return err == nil && u.Scheme != "" && (u.Host != "" || u.RawQuery != "" || strings.Contains(u.Opaque, "="))
}

// FragmentShown reports whether u's fragment may be shown: not when an
// unescaped '#' may have cut a secret in two, leaving its rest in the
// fragment. That is where u has user information (a password), or where
// the query before the '#' ends with a parameter whose value is a secret or
// (accepted not nil) one the scheme does not accept, and may be anything.
func FragmentShown(u *url.URL, accepted func(name string) bool) bool {
	if u.User != nil {
		return false
	}
	if u.RawQuery == "" {
		return true
	}
	last := u.RawQuery[strings.LastIndexByte(u.RawQuery, '&')+1:]
	k, _, _ := strings.Cut(last, "=")
	return !Secret(k) && (accepted == nil || accepted(unescape(k)))
}

func unescape(key string) string {
	if k, err := url.QueryUnescape(key); err == nil {
		return k
	}
	return key
}

// Cut begins what URL shows for a URL whose user information a '#', '/' or
// '?' cut in two: one that does not name what its user meant.
const Cut = "(not shown: user information cut"

// Secret reports a query parameter (named key, as given or
// percent-encoded) whose value is a credential: libpq's password and
// sslpassword, a SAS token's sig, S3's X-Amz-Signature, and any other name
// that says so.
func Secret(key string) bool {
	key = strings.ToLower(unescape(key))
	for _, s := range []string{"password", "secret", "token", "sig"} {
		if strings.Contains(key, s) {
			return true
		}
	}
	return false
}
