package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/racedecider/leaderelection/internal/redact"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// URLOpener opens a RaceDecider for URLs of one scheme. A backend package
// registers one with RegisterScheme from an init function, so that importing
// the package (a blank import is enough) makes its scheme available to
// OpenDecider:
//
//	import _ "github.com/racedecider/leaderelection/file"
//
// The in-tree backends register these schemes:
//
//	mem://NAME                     package memory: in-process, shared by name
//	file:///PATH                   package file: one file on a local or shared POSIX filesystem
//	gs://BUCKET/OBJECT             package gcs: Application Default Credentials
//	s3://BUCKET/KEY?region=R&endpoint=URL&path_style=true
//	                               package s3: the AWS SDK's default configuration
//
// and these backends, modules of their own so that their SDKs weigh only on
// their users, register theirs:
//
//	azblob://CONTAINER/BLOB?storage_account=NAME&endpoint=URL
//	                               module .../azblob: Azure Blob Storage
//	dynamodb://TABLE/KEY?region=R&endpoint=URL
//	                               module .../dynamodb: one item in a DynamoDB table
//	postgres://USER@HOST:PORT/DATABASE?table=TABLE&election=NAME
//	                               module .../postgres: one row in a PostgreSQL table
//	k8s://NAMESPACE/NAME           module .../kube: a Kubernetes Lease (kubeconfig or in-cluster)
type URLOpener struct {
	// Open returns a RaceDecider for u. OpenDecider has already checked
	// that u's scheme is the one registered and that its query has no
	// parameter outside Params; Open checks everything else and returns
	// errors that say what a valid URL looks like.
	Open func(ctx context.Context, u *url.URL) (RaceDecider, error)

	// Params lists the query parameters Open accepts. OpenDecider rejects a
	// URL carrying any other, naming the ones accepted.
	Params []string

	// Form shows the URL's shape, such as "gs://BUCKET/OBJECT", for error
	// messages and help texts.
	Form string
}

var schemes = struct {
	sync.RWMutex
	m map[string]URLOpener
}{m: map[string]URLOpener{}}

// inTreePackages names the package that registers each scheme this module
// provides, so that OpenDecider can say which import a URL is missing.
var inTreePackages = map[string]string{
	"mem":  "github.com/racedecider/leaderelection/memory",
	"file": "github.com/racedecider/leaderelection/file",
	"gs":   "github.com/racedecider/leaderelection/gcs",
	"s3":   "github.com/racedecider/leaderelection/s3",

	"azblob":     "github.com/racedecider/leaderelection/azblob",
	"dynamodb":   "github.com/racedecider/leaderelection/dynamodb",
	"postgres":   "github.com/racedecider/leaderelection/postgres",
	"postgresql": "github.com/racedecider/leaderelection/postgres",
	"k8s":        "github.com/racedecider/leaderelection/kube",
}

// RegisterScheme makes OpenDecider open URLs whose scheme is scheme (compared
// without regard to case) with opener. It is meant to be called from a
// backend package's init function, and panics if the scheme is empty or
// already registered, or if opener.Open is nil.
func RegisterScheme(scheme string, opener URLOpener) {
	scheme = strings.ToLower(scheme)
	if scheme == "" {
		panic("leaderelection: RegisterScheme with an empty scheme")
	}
	if opener.Open == nil {
		panic("leaderelection: RegisterScheme(" + scheme + ") with a nil Open")
	}
	schemes.Lock()
	defer schemes.Unlock()
	if _, dup := schemes.m[scheme]; dup {
		panic("leaderelection: RegisterScheme called twice for scheme " + scheme)
	}
	opener.Params = slices.Clone(opener.Params)
	schemes.m[scheme] = opener
}

// Schemes returns the registered schemes, sorted, each with the URL form its
// opener gave (or "SCHEME://..." when it gave none).
func Schemes() []string {
	schemes.RLock()
	defer schemes.RUnlock()
	out := make([]string, 0, len(schemes.m))
	for s, o := range schemes.m {
		form := o.Form
		if form == "" {
			form = s + "://..."
		}
		out = append(out, form)
	}
	slices.Sort(out)
	return out
}

// ErrBadURL is wrapped by every OpenDecider error about the URL itself (an
// unknown scheme or query parameter, a missing bucket name, a relative path),
// as opposed to a failure to set up a client for a good URL. Openers wrap it
// too. Callers may use it to tell a usage error from an environment problem.
var ErrBadURL = errors.New("bad store URL")

// OpenDecider returns the RaceDecider rawURL names, such as
// "file:///var/lib/myjob/leader" or "s3://my-bucket/elections/myjob?region=eu-west-1".
// The package that provides the URL's scheme must be imported, if only with
// a blank import; see URLOpener for the in-tree schemes.
//
// An unknown scheme, or a query parameter the scheme does not accept, is an
// error wrapping ErrBadURL that lists what is accepted. Whether the store
// can be reached is not checked: the first ReadCurrent tells. A '#' anywhere
// in rawURL is an error too, even with nothing after it: write a '#' in a
// name or a password as %23. Errors show the URL with its password, query
// parameters named like one, and the values of query parameters the scheme
// does not accept, as xxxxx.
func OpenDecider(ctx context.Context, rawURL string) (RaceDecider, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// A *url.Error quotes the whole URL, password included: keep
		// only why it does not parse. Even that may quote part of a
		// password, which a '#', '/' or '?' cut into the host
		// (`invalid port ":hunter2" after host`).
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		if strings.Contains(rawURL, "@") {
			if strings.Contains(err.Error(), `"`) {
				err = errors.New("it does not parse")
			}
			err = fmt.Errorf("%w; %s", err, encodeHint)
		}
		return nil, fmt.Errorf("leaderelection: OpenDecider(%q): %w: %w", redact.URL(rawURL), ErrBadURL, err)
	}
	if shown := redact.URL(rawURL); strings.Contains(shown, redact.Cut) {
		// Not what its user meant, and the scheme's own errors would
		// quote the password's pieces (as a query parameter's name).
		return nil, fmt.Errorf("leaderelection: OpenDecider(%q): %w: %s", shown, ErrBadURL, encodeHint)
	}
	return openURL(ctx, rawURL, u)
}

// encodeHint is how to fix a URL whose user information does not parse.
const encodeHint = "a user name or password holding '#', '/', '?', '@', '%' or a space must be percent-encoded ('#' as %23)"

// openURL opens u, parsed from rawURL. Its errors show rawURL with the
// values of the query parameters the scheme does not accept as xxxxx, as
// well as its secrets: one its user meant for something else may be a key
// or a token (account_key=..., sas=...).
func openURL(ctx context.Context, rawURL string, u *url.URL) (RaceDecider, error) {
	scheme := strings.ToLower(u.Scheme)
	schemes.RLock()
	opener, ok := schemes.m[scheme]
	schemes.RUnlock()
	accepted := func(name string) bool { return slices.Contains(opener.Params, name) }
	fail := func(err error) (RaceDecider, error) {
		return nil, fmt.Errorf("leaderelection: OpenDecider(%q): %w", redact.Accepting(rawURL, accepted), err)
	}
	if !ok {
		return fail(unknownScheme(scheme))
	}
	// A '#' anywhere, even with nothing after it (which net/url drops
	// without a trace: file:///tmp/rec# would open /tmp/rec), and before
	// the query is read: a '#' may have cut it short.
	if err := urlcheck.Fragment(rawURL, u, accepted); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrBadURL, err))
	}
	if err := checkParams(u, scheme, opener.Params); err != nil {
		return fail(err)
	}
	d, err := opener.Open(ctx, u)
	if err != nil {
		return fail(err)
	}
	return d, nil
}

func unknownScheme(scheme string) error {
	registered := strings.Join(Schemes(), ", ")
	if registered == "" {
		registered = "none"
	}
	if scheme == "" {
		return fmt.Errorf("%w: no scheme; registered: %s", ErrBadURL, registered)
	}
	hint := ""
	if pkg, ok := inTreePackages[scheme]; ok {
		hint = fmt.Sprintf(" (import _ %q to register it)", pkg)
	}
	return fmt.Errorf("%w: unknown scheme %q%s; registered: %s", ErrBadURL, scheme, hint, registered)
}

// queryFault says what in a query that does not parse is wrong without
// quoting a value, which may be a password or a token: net/url's error
// quotes the bad escape, and so the characters after it.
func queryFault(raw string) string {
	for pair := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return "a parameter name has a bad %-escape (write a literal % as %25)"
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return fmt.Sprintf("the value of %q has a bad %%-escape (write a literal %% as %%25)", key)
		}
	}
	if strings.Contains(raw, ";") {
		return "a ';' separates parameters (use '&')"
	}
	return "it does not parse"
}

func checkParams(u *url.URL, scheme string, accepted []string) error {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("%w: query: %s", ErrBadURL, queryFault(u.RawQuery))
	}
	var unknown []string
	for k := range q {
		if !slices.Contains(accepted, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	want := "none"
	if len(accepted) > 0 {
		want = strings.Join(accepted, ", ")
	}
	noun := "parameter"
	if len(unknown) > 1 {
		noun = "parameters"
	}
	return fmt.Errorf("%w: unknown query %s %s; %s URLs accept: %s",
		ErrBadURL, noun, strings.Join(unknown, ", "), scheme, want)
}
