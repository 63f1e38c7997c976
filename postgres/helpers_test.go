package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/racedecider/leaderelection/internal/testenv"
	"github.com/racedecider/leaderelection/postgres"
)

// envDSN is the variable scripts/postgres.sh prints: the throwaway cluster's
// superuser connection string. Tests never fall back to a system server.
const envDSN = "LEADERELECTION_POSTGRES_DSN"

// runID keeps this run's tables, elections and roles apart from earlier
// runs' on a cluster whose data persists.
var (
	runID = func() string {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}()
	seq atomic.Int64
)

func serverDSN(t testing.TB) string {
	t.Helper()
	return testenv.Server(t, envDSN, "PostgreSQL", `eval "$(scripts/postgres.sh start)"`)
}

// newPool returns a pool on dsn, closed by t.Cleanup; configure, if given,
// changes its configuration first.
func newPool(t testing.TB, dsn string, maxConns int32, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgxpool.ParseConfig: %v", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	for _, f := range configure {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgxpool.NewWithConfig: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// freshName returns a name no other test of any run uses.
func freshName(prefix string) string {
	return fmt.Sprintf("%s_%s_%d", prefix, runID, seq.Add(1))
}

// freshTable creates a new election table.
func freshTable(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	table := freshName("le_test")
	if err := postgres.CreateTable(t.Context(), pool, table); err != nil {
		t.Fatalf("CreateTable(%s): %v", table, err)
	}
	t.Cleanup(func() {
		// t.Context has ended by now.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()); err != nil {
			t.Logf("dropping %s: %v", table, err)
		}
	})
	return table
}

// newDecider returns a Decider, closed by t.Cleanup.
func newDecider(t testing.TB, pool *pgxpool.Pool, table, election string, opts ...postgres.Option) *postgres.Decider {
	t.Helper()
	d, err := postgres.New(pool, table, election, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// withHost returns dsn pointing at hostPort (a fault proxy) instead.
func withHost(t testing.TB, dsn, hostPort string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = hostPort
	return u.String()
}

// withUser returns dsn logging in as user with password.
func withUser(t testing.TB, dsn, user, password string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// hostPort returns dsn's host:port.
func hostPort(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// newRole creates a login role with password and whatever grants says on
// table, and drops it at cleanup.
func newRole(t testing.TB, admin *pgxpool.Pool, table, grants string) (user, password string) {
	t.Helper()
	user, password = freshName("le_role"), "pw-"+runID
	exec(t, admin, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", user, password))
	if grants != "" {
		exec(t, admin, fmt.Sprintf("GRANT %s ON %s TO %s", grants, pgx.Identifier{table}.Sanitize(), user))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '%s'", user))
		_, _ = admin.Exec(ctx, "DROP OWNED BY "+user)
		_, _ = admin.Exec(ctx, "DROP ROLE "+user)
	})
	return user, password
}

func exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
