package memory

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// Scheme is the URL scheme this package registers with
// leaderelection.RegisterScheme: leaderelection.OpenDecider(ctx, "mem://NAME")
// returns the process's Decider called NAME, creating it empty on first use,
// so that every opener of the same name in one process shares one election.
// It accepts no query parameters, fragment or user information.
const Scheme = "mem"

var named = struct {
	sync.Mutex
	m map[string]*Decider
}{m: map[string]*Decider{}}

func init() {
	leaderelection.RegisterScheme(Scheme, leaderelection.URLOpener{
		Open: openURL,
		Form: "mem://NAME",
	})
}

func openURL(_ context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
	if err := urlcheck.Check(u); err != nil {
		return nil, fmt.Errorf("%w: %w; want mem://NAME", leaderelection.ErrBadURL, err)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: want mem://NAME", leaderelection.ErrBadURL)
	}
	name := u.Host + u.Path
	if name == "" {
		return nil, fmt.Errorf("%w: no election name; want mem://NAME", leaderelection.ErrBadURL)
	}
	named.Lock()
	defer named.Unlock()
	d, ok := named.m[name]
	if !ok {
		d = NewDecider()
		d.name = "mem://" + name
		named.m[name] = d
	}
	return d, nil
}
