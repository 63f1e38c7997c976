package postgres

import (
	"context"
	"fmt"
	"net/url"
	"time"

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
// a '#' in a password as %23). So is a value pgx or pgxpool would take but not
// as meant: sslsni other than 0 or 1, pool_min_conns below 0 or above
// pool_max_conns, a negative pool_max_conn_lifetime or
// pool_max_conn_idle_time, a pool_health_check_period under a second. The
// Decider opened owns its pool: close it with its Close method (it is an
// io.Closer).
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

// minHealthCheckPeriod is the shortest pool_health_check_period taken.
const minHealthCheckPeriod = time.Second

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
	// panics in the pool's goroutine, and one of a nanosecond runs the
	// checks, each of which takes every idle connection out of the pool,
	// without a pause; a negative lifetime or idle time means what 0 does
	// (no limit on a connection's age; close every idle one at each
	// check), and is a slip. pgx takes any sslsni but "1" for "0": sslsni=true
	// would turn SNI off.
	switch {
	case cfg.HealthCheckPeriod < minHealthCheckPeriod:
		return nil, fmt.Errorf("%w: pool_health_check_period %v: want a duration of at least %v", leaderelection.ErrBadURL, cfg.HealthCheckPeriod, minHealthCheckPeriod)
	case cfg.MinConns < 0 || cfg.MinConns > cfg.MaxConns:
		return nil, fmt.Errorf("%w: pool_min_conns %d: want 0 to pool_max_conns (%d)", leaderelection.ErrBadURL, cfg.MinConns, cfg.MaxConns)
	case cfg.MaxConnLifetime < 0:
		return nil, fmt.Errorf("%w: pool_max_conn_lifetime %v: want 0 (no limit) or a positive duration", leaderelection.ErrBadURL, cfg.MaxConnLifetime)
	case cfg.MaxConnIdleTime < 0:
		return nil, fmt.Errorf("%w: pool_max_conn_idle_time %v: want 0 or a positive duration", leaderelection.ErrBadURL, cfg.MaxConnIdleTime)
	}
	if v := q.Get("sslsni"); v != "" && v != "0" && v != "1" {
		return nil, fmt.Errorf("%w: sslsni=%q: want 0 or 1", leaderelection.ErrBadURL, v)
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
