package postgres_test

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/postgres"
)

func TestOpenDeciderBadURLs(t *testing.T) {
	cases := map[string]string{
		"postgres://u@h/db?election=e":                       "no table",
		"postgres://u@h/db?table=t":                          "no election",
		"postgres://u@h/db?table=t&election=e&colour=blue":   "unknown query parameter colour",
		"postgresql://u@h/db?table=a.b.c&election=e":         `table "a.b.c"`,
		"postgres://u@h/db?table=t&election=e&sslmode=bogus": "sslmode",
		"postgres:opaque?table=t&election=e":                 "want postgres://",
		// Present but empty is not left out, nor is a parameter given twice.
		"postgres://u@h/db?table=t&election=e&sslmode=": "query parameter sslmode is empty",
		"postgres://u@h/db?table=&election=e":           "query parameter table is empty",
		"postgres://u@h/db?table=t&election=e&table=u":  "query parameter table is given 2 times",
		"postgres://u@h/db?table=t&election=e#1":        "a fragment (#...)",
		// Pool settings pgxpool would take and fail on later (a health
		// check period of 0 panicked).
		"postgres://u@h/db?table=t&election=e&pool_health_check_period=0s":       "pool_health_check_period 0s: want a duration of at least 1s",
		"postgres://u@h/db?table=t&election=e&pool_health_check_period=-1m":      "pool_health_check_period -1m0s",
		"postgres://u@h/db?table=t&election=e&pool_min_conns=5&pool_max_conns=1": "pool_min_conns 5: want 0 to pool_max_conns (1)",
		"postgres://u@h/db?table=t&election=e&pool_min_conns=-3":                 "pool_min_conns -3",
		// Values pgx or pgxpool takes, but not as meant.
		"postgres://u@h/db?table=t&election=e&pool_health_check_period=1ns": "pool_health_check_period 1ns: want a duration of at least 1s",
		"postgres://u@h/db?table=t&election=e&pool_max_conn_lifetime=-1h":   "pool_max_conn_lifetime -1h0m0s: want 0 (no limit) or a positive duration",
		"postgres://u@h/db?table=t&election=e&pool_max_conn_idle_time=-5m":  "pool_max_conn_idle_time -5m0s: want 0 or a positive duration",
		"postgres://u@h/db?table=t&election=e&sslmode=require&sslsni=true":  `sslsni="true": want 0 or 1`,
		"postgres://u@h/db?table=t&election=e&sslmode=require&sslsni=yes":   `sslsni="yes"`,
	}
	for raw, want := range cases {
		d, err := leaderelection.OpenDecider(t.Context(), raw)
		if err == nil {
			if c, ok := d.(io.Closer); ok {
				c.Close()
			}
			t.Errorf("OpenDecider(%q) succeeded", raw)
			continue
		}
		if !errors.Is(err, leaderelection.ErrBadURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenDecider(%q) = %v; want ErrBadURL containing %q", raw, err, want)
		}
	}
	// The password never shows in an error.
	_, err := leaderelection.OpenDecider(t.Context(), "postgres://u:s3cret@h/db?table=t&election=e&password=s3cret&password=s3cret2")
	if err == nil || !strings.Contains(err.Error(), "password is given 2 times") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("repeated password: error %v; want one naming the parameter, without the password", err)
	}
	_, err = leaderelection.OpenDecider(t.Context(), "postgres://u:s3cret@h/db?table=t&election=e&sslmode=bogus")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v shows the password", err)
	}
}

func TestOpenDecider(t *testing.T) {
	dsn := serverDSN(t)
	table := freshTable(t, newPool(t, dsn, 1))
	election := freshName("election")
	for _, scheme := range []string{"postgres", "postgresql"} {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Scheme = scheme
		q := u.Query()
		q.Set("table", table)
		q.Set("election", election)
		q.Set("application_name", "leaderelection-test")
		u.RawQuery = q.Encode()
		d, err := leaderelection.OpenDecider(t.Context(), u.String())
		if err != nil {
			t.Fatalf("OpenDecider(%s): %v", u.Redacted(), err)
		}
		pd, ok := d.(*postgres.Decider)
		if !ok {
			t.Fatalf("OpenDecider returned a %T", d)
		}
		// Errors, logs and metrics name the server and database too.
		if want := fmt.Sprintf("postgres table %q row %q on %s%s", table, election, u.Host, u.Path); pd.String() != want {
			t.Errorf("String() = %q, want %q", pd.String(), want)
		}
		if _, err := pd.ReadCurrent(t.Context()); err != nil {
			t.Errorf("ReadCurrent through %s: %v", scheme, err)
		}
		if scheme == "postgres" {
			faultproxy.MustWrite(t, pd, faultproxy.Record(0, "w0", entry.LeaderToken{}))
		}
		pd.Close()
		// The pool was the Decider's: closed with it.
		if _, err := pd.ReadCurrent(t.Context()); err == nil {
			t.Errorf("ReadCurrent after Close of a Decider opened from a URL succeeded")
		}
	}
}

// A Decider opened from a URL and closed refuses (its pool is gone for good)
// rather than reporting throttling that a retry would never end.
func TestClosedDeciderRefuses(t *testing.T) {
	d, err := leaderelection.OpenDecider(t.Context(), "postgres://u@127.0.0.1:1/db?table=t&election=e")
	if err != nil {
		t.Fatal(err)
	}
	d.(io.Closer).Close()
	if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "pool is closed") {
		t.Errorf("ReadCurrent on a closed Decider: %v; want ErrRefused saying the pool is closed", err)
	}
	if _, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w0", entry.LeaderToken{})); !errors.Is(err, entry.ErrRefused) {
		t.Errorf("WriteEntry on a closed Decider: %v; want ErrRefused", err)
	}
}
