package file

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"path/filepath"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// Scheme is the URL scheme this package registers with
// leaderelection.RegisterScheme: leaderelection.OpenDecider(ctx,
// "file:///path/to/record") returns NewDecider("/path/to/record"). The path
// must be absolute; the host must be empty or "localhost". It accepts no
// query parameters, fragment or user information.
const Scheme = "file"

func init() {
	leaderelection.RegisterScheme(Scheme, leaderelection.URLOpener{
		Open: openURL,
		Form: "file:///PATH",
	})
}

func openURL(_ context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
	if err := urlcheck.Check(u); err != nil {
		return nil, fmt.Errorf("%w: %w; want file:///PATH", leaderelection.ErrBadURL, err)
	}
	switch {
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: %q is not an absolute path; want file:///PATH", leaderelection.ErrBadURL, u.Opaque)
	case u.Host != "" && u.Host != "localhost":
		return nil, fmt.Errorf("%w: host %q: a file URL names a file on this host (or on a filesystem mounted here); want file:///PATH",
			leaderelection.ErrBadURL, u.Host)
	case u.Path == "" || u.Path == "/":
		return nil, fmt.Errorf("%w: no path; want file:///PATH", leaderelection.ErrBadURL)
	case u.Path[len(u.Path)-1] == '/':
		return nil, fmt.Errorf("%w: %q names a directory; want file:///PATH/TO/RECORD", leaderelection.ErrBadURL, u.Path)
	case !path.IsAbs(u.Path):
		return nil, fmt.Errorf("%w: %q is not an absolute path; want file:///PATH", leaderelection.ErrBadURL, u.Path)
	}
	return NewDecider(filepath.FromSlash(u.Path))
}
