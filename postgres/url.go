package postgres

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// Scheme is the URL scheme this package registers with
// leaderelection.RegisterScheme, along with its synonym "postgresql":
//
//	postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE?table=TABLE&election=NAME[&sslmode=...]
//
// table and election are New's arguments; every other part of the URL is a
// PostgreSQL connection string, given to pgxpool.ParseConfig, which also
// reads the usual PG* environment variables (PGPASSWORD, PGSSLMODE, ...)
// for what the URL leaves out. Of the query parameters libpq and pgx know,
// these are accepted: host, port, dbname, user, password, passfile,
// service, sslmode, sslrootcert, sslcert, sslkey, sslpassword, sslsni,
// connect_timeout, application_name, target_session_attrs and pgxpool's
// pool_max_conns, pool_min_conns, pool_max_conn_lifetime,
// pool_max_conn_idle_time and pool_health_check_period; any other is an
// error, as is one given twice or empty ("sslmode="), or a fragment (write
// a '#' in a password as %23). The Decider opened owns its pool: close it
// with its Close method (it is an io.Closer).
const Scheme = "postgres"

var urlParams = []string{
	"table", "election",
	"host", "port", "dbname", "user", "password", "passfile", "service",
	"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslsni",
	"connect_timeout", "application_name", "target_session_attrs",
	"pool_max_conns", "pool_min_conns", "pool_max_conn_lifetime",
	"pool_max_conn_idle_time", "pool_health_check_period",
}

const form = "postgres://USER@HOST:PORT/DATABASE?table=TABLE&election=NAME"

func init() {
	for _, s := range []string{Scheme, "postgresql"} {
		leaderelection.RegisterScheme(s, leaderelection.URLOpener{
			Open:   openURL,
			Params: urlParams,
			Form:   s + "://USER@HOST:PORT/DATABASE?table=TABLE&election=NAME",
		})
	}
}

func openURL(_ context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
	if err := urlcheck.CheckWithUser(u); err != nil {
		return nil, fmt.Errorf("%w: %w; want %s", leaderelection.ErrBadURL, err, form)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: want %s", leaderelection.ErrBadURL, form)
	}
	q := u.Query()
	table, election := q.Get("table"), q.Get("election")
	switch {
	case table == "":
		return nil, fmt.Errorf("%w: no table: add ?table=TABLE (want %s)", leaderelection.ErrBadURL, form)
	case election == "":
		return nil, fmt.Errorf("%w: no election: add &election=NAME (want %s)", leaderelection.ErrBadURL, form)
	}
	q.Del("table")
	q.Del("election")
	conn := *u
	conn.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(conn.String())
	if err != nil {
		// pgx's error redacts the password.
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	// pgxpool takes these as given: a health check period not above zero
	// panics in the pool's goroutine.
	switch {
	case cfg.HealthCheckPeriod <= 0:
		return nil, fmt.Errorf("%w: pool_health_check_period %v: want a positive duration", leaderelection.ErrBadURL, cfg.HealthCheckPeriod)
	case cfg.MinConns < 0 || cfg.MinConns > cfg.MaxConns:
		return nil, fmt.Errorf("%w: pool_min_conns %d: want 0 to pool_max_conns (%d)", leaderelection.ErrBadURL, cfg.MinConns, cfg.MaxConns)
	}
	// Connecting is lazy: the first ReadCurrent tells whether the server
	// can be reached.
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: creating a connection pool: %w", err)
	}
	d, err := New(pool, table, election)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	d.ownPool = true
	return d, nil
}
