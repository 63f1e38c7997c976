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
// all of it as given when it has none). A URL that does not parse, or whose
// user information is not where a URL keeps it, is shown as its scheme
// alone, since where its secrets are cannot be told.
func URL(rawURL string) string {
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
	if u.RawQuery != "" {
		// In place, so that the parameters keep their order and encoding.
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, v, ok := strings.Cut(p, "=")
			switch {
			case !ok:
			case secret(k):
				parts[i] = k + "=xxxxx"
			case strings.Contains(v, "%40") || strings.Contains(v, "@"):
				// A URL as a value (endpoint=http://user:pw@host) may
				// carry a password of its own.
				if inner, err := url.QueryUnescape(v); err == nil {
					parts[i] = k + "=" + url.QueryEscape(URL(inner))
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

// Cut begins what URL shows for a URL whose user information a '#', '/' or
// '?' cut in two: one that does not name what its user meant.
const Cut = "(not shown: user information cut"

// secret reports a query parameter whose value is a credential: libpq's
// password and sslpassword, and any other name that says so.
func secret(key string) bool {
	if k, err := url.QueryUnescape(key); err == nil {
		key = k
	}
	key = strings.ToLower(key)
	for _, s := range []string{"password", "secret", "token", "sig"} {
		if strings.Contains(key, s) {
			return true
		}
	}
	return false
}
