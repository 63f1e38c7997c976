package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/postgres"
	"github.com/racedecider/leaderelection/racedecidertest"
)

func TestConformance(t *testing.T) {
	pool := newPool(t, serverDSN(t), 0)
	table := freshTable(t, pool)
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
		return newDecider(t, pool, table, freshName("election"))
	})
}

func TestDeleted(t *testing.T) {
	pool := newPool(t, serverDSN(t), 0)
	table, election := freshTable(t, pool), freshName("election")
	racedecidertest.CheckDeleted(t, newDecider(t, pool, table, election), func(t *testing.T) {
		exec(t, pool, "DELETE FROM "+pgx.Identifier{table}.Sanitize()+" WHERE name = $1", election)
	})
}

// TestRaceWriters has 50 writers, each with a pool and so a connection of
// its own, race for one row.
func TestRaceWriters(t *testing.T) {
	dsn := serverDSN(t)
	table := freshTable(t, newPool(t, dsn, 1))
	election := freshName("election")
	ds := make([]leaderelection.RaceDecider, 50)
	for i := range ds {
		ds[i] = newDecider(t, newPool(t, dsn, 1), table, election)
	}
	racedecidertest.RaceWriters(t, ds, 10)
}

func TestCorruptRecord(t *testing.T) {
	pool := newPool(t, serverDSN(t), 0)
	table := freshTable(t, pool)
	election := freshName("election")
	d := newDecider(t, pool, table, election)
	racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) {
		exec(t, pool, "INSERT INTO "+pgx.Identifier{table}.Sanitize()+
			" (name, version, record, committed_at, secret) VALUES ($1, 1, $2, now(), '')"+
			" ON CONFLICT (name) DO UPDATE SET record = excluded.record", election, data)
	}, d.String())
}

// TestNullColumns: a row with NULL where a record needs a value (a table
// made by hand without NOT NULL, written by something else) is a corrupt
// record naming the table and row, and Acquire ends on it, rather than a
// read that fails to scan and is retried for ever.
func TestNullColumns(t *testing.T) {
	pool := newPool(t, serverDSN(t), 0)
	for _, col := range []string{"version", "committed_at"} {
		t.Run(col, func(t *testing.T) {
			table := freshTable(t, pool)
			ident := pgx.Identifier{table}.Sanitize()
			election := freshName("election")
			d := newDecider(t, pool, table, election)
			data, err := entry.Marshal(faultproxy.Record(1, "w1", entry.LeaderToken{}))
			if err != nil {
				t.Fatal(err)
			}
			exec(t, pool, "ALTER TABLE "+ident+" ALTER COLUMN "+col+" DROP NOT NULL")
			exec(t, pool, "INSERT INTO "+ident+" (name, version, record, committed_at, secret) VALUES ($1, 1, $2, now(), '')", election, data)
			exec(t, pool, "UPDATE "+ident+" SET "+col+" = NULL WHERE name = $1", election)
			_, err = d.ReadCurrent(t.Context())
			if !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(err.Error(), d.String()) || !strings.Contains(err.Error(), col) {
				t.Fatalf("ReadCurrent of a row with %s NULL: %v; want entry.ErrCorruptRecord naming %s and the column", col, err, d.String())
			}
			if err := racedecidertest.AcquireEnds(t, d); !errors.Is(err, entry.ErrCorruptRecord) {
				t.Errorf("Acquire on a row with %s NULL: %v; want it to end with entry.ErrCorruptRecord", col, err)
			}
		})
	}
}

// TestMissingTable checks that a missing table (or schema) is a refusal, on
// reads and writes, naming the table, and never an empty election.
func TestMissingTable(t *testing.T) {
	pool := newPool(t, serverDSN(t), 0)
	for _, table := range []string{freshName("le_missing"), freshName("le_missing_schema") + ".elections"} {
		d := newDecider(t, pool, table, "e")
		_, err := d.ReadCurrent(t.Context())
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), d.String()) || !strings.Contains(err.Error(), "create the table with CreateTable") {
			t.Errorf("ReadCurrent on missing table %s: %v; want ErrRefused naming %s and saying how to create it", table, err, d.String())
		}
		_, err = d.WriteEntry(t.Context(), faultproxy.Record(0, "w0", entry.LeaderToken{}))
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("WriteEntry on missing table %s: %v; want ErrRefused naming %s", table, err, d.String())
		}
	}
}

// TestPermissionDenied checks that missing privileges are refusals: a role
// that may not UPDATE can create the row but not replace it, and a role with
// no privilege cannot read it.
func TestPermissionDenied(t *testing.T) {
	dsn := serverDSN(t)
	admin := newPool(t, dsn, 0)
	table := freshTable(t, admin)

	user, pw := newRole(t, admin, table, "SELECT, INSERT")
	d := newDecider(t, newPool(t, withUser(t, dsn, user, pw), 0), table, "e")
	tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	_, err := d.WriteEntry(t.Context(), faultproxy.Record(1, "w1", tok))
	if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "42501") || !strings.Contains(err.Error(), "needs SELECT, INSERT and UPDATE") {
		t.Errorf("UPDATE without the privilege: %v; want ErrRefused with SQLSTATE 42501, naming the privileges", err)
	}
	if got := faultproxy.MustRead(t, d); got.WriteID != "w0" {
		t.Errorf("refused write changed the row: %+v", got)
	}

	user, pw = newRole(t, admin, table, "")
	d = newDecider(t, newPool(t, withUser(t, dsn, user, pw), 0), table, "e")
	if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) {
		t.Errorf("SELECT without the privilege: %v; want ErrRefused", err)
	}
}

// TestWrongShapeTable checks that a table that is not as CreateTable makes
// it is a refusal naming the table and saying what shape it needs, not an
// unknown outcome that the engine would read back for ever: Acquire ends.
func TestWrongShapeTable(t *testing.T) {
	pool := newPool(t, serverDSN(t), 0)
	const cols = "version bigint NOT NULL, record bytea NOT NULL, committed_at timestamptz NOT NULL, secret bytea NOT NULL"
	cases := []struct {
		what, code, create string // create: %s is the table
	}{
		{"an id primary key, name not unique", "42P10", "CREATE TABLE %s (id serial PRIMARY KEY, name text NOT NULL, " + cols + ")"},
		{"an extra NOT NULL column without a default", "23502", "CREATE TABLE %s (name text PRIMARY KEY, " + cols + ", owner text NOT NULL)"},
		{"a CHECK constraint", "23514", "CREATE TABLE %s (name text PRIMARY KEY, " + cols + ", CHECK (length(record) < 8))"},
		{"a materialized view", "42809", "CREATE MATERIALIZED VIEW %[1]s AS SELECT 'e'::text AS name, 1::bigint AS version," +
			" ''::bytea AS record, now() AS committed_at, ''::bytea AS secret WITH NO DATA; CREATE UNIQUE INDEX ON %[1]s (name)"},
		{"a view that cannot be written", "55000", "CREATE VIEW %s AS SELECT 'e'::text AS name, 1::bigint AS version," +
			" ''::bytea AS record, now() AS committed_at, ''::bytea AS secret"},
		// The election's name is longer than the column takes.
		{"a name of varchar(4)", "22001", "CREATE TABLE %s (name varchar(4) PRIMARY KEY, " + cols + ")"},
		// pgx cannot encode our 63-bit versions as the integer the
		// server asks for, and sends nothing.
		{"a version of integer", "failed to encode", "CREATE TABLE %s (name text PRIMARY KEY, version integer NOT NULL," +
			" record bytea NOT NULL, committed_at timestamptz NOT NULL, secret bytea NOT NULL)"},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			table := freshName("le_shape")
			exec(t, pool, fmt.Sprintf(c.create, pgx.Identifier{table}.Sanitize()))
			d := newDecider(t, pool, table, "election")
			_, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w0", entry.LeaderToken{}))
			if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), c.code) ||
				!strings.Contains(err.Error(), d.String()) || !strings.Contains(err.Error(), "is not as CreateTable") {
				t.Errorf("WriteEntry on a table with %s: %v; want ErrRefused with SQLSTATE %s, naming %s and the shape it needs",
					c.what, err, c.code, d.String())
			}
			if c.code != "42P10" && c.code != "23502" && c.code != "22001" && c.code != "failed to encode" {
				return
			}
			err = racedecidertest.AcquireEnds(t, d)
			if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), d.String()) {
				t.Errorf("Acquire on a table with %s: %v; want it to end at once with ErrRefused naming %s", c.what, err, d.String())
			}
		})
	}
}

func TestCreateTable(t *testing.T) {
	pool := newPool(t, serverDSN(t), 0)
	table := freshName("le_create")
	// Concurrent creators all succeed, as processes starting together would.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = postgres.CreateTable(t.Context(), pool, table) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("CreateTable #%d: %v", i, err)
		}
	}
	if err := postgres.CreateTable(t.Context(), pool, table); err != nil {
		t.Errorf("CreateTable on an existing table: %v", err)
	}
	d := newDecider(t, pool, table, "e")
	faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))

	// Schema-qualified.
	schema := freshName("le_schema")
	exec(t, pool, "CREATE SCHEMA "+schema)
	if err := postgres.CreateTable(t.Context(), pool, schema+".elections"); err != nil {
		t.Fatalf("CreateTable(%s.elections): %v", schema, err)
	}
	faultproxy.MustWrite(t, newDecider(t, pool, schema+".elections", "e"), faultproxy.Record(0, "w0", entry.LeaderToken{}))
}

func TestNewRejectsBadInput(t *testing.T) {
	pool := newPool(t, "postgres://nobody@127.0.0.1:1/none", 0) // never connects
	long := strings.Repeat("x", 64)
	cases := []struct {
		table, election, want string
	}{
		{"", "e", `table ""`},
		{"a.b.c", "e", `table "a.b.c"`},
		{".t", "e", "empty part"},
		{long, "e", "63-byte"},
		{"t", "", "election name is empty"},
		{"t", "a\x00b", "NUL"},
		{"t", strings.Repeat("e", 2000), "more than 1024"},
	}
	for _, c := range cases {
		_, err := postgres.New(pool, c.table, c.election)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%.20q, %.20q) = %v; want an error containing %q", c.table, c.election, err, c.want)
		}
	}
	if _, err := postgres.New(nil, "t", "e"); err == nil || !strings.Contains(err.Error(), "pool is nil") {
		t.Errorf("New(nil pool) = %v", err)
	}
	if err := postgres.CreateTable(t.Context(), pool, "a.b.c"); err == nil {
		t.Error("CreateTable(a.b.c) succeeded")
	}
}

// TestErrorClasses checks errorClass against errors the server itself sends:
// some provoked as an application would meet them, the others raised with
// their SQLSTATE code by the server (RAISE ... USING ERRCODE), so that each
// goes through pgx's real parsing of the server's answer.
func TestErrorClasses(t *testing.T) {
	dsn := serverDSN(t)
	admin := newPool(t, dsn, 0)

	classOf := func(err error) string {
		switch c := postgres.ErrorClass(err); c {
		case nil:
			return "unknown"
		case entry.ErrRefused:
			return "refused"
		case entry.ErrThrottled:
			return "throttled"
		default:
			return c.Error()
		}
	}
	raised := map[string]string{
		"42501": "refused", "42P01": "refused", "42703": "refused", "3D000": "refused",
		"3F000": "refused", "28000": "refused", "28P01": "refused", "42883": "refused",
		"53300": "throttled", "53100": "throttled", "40001": "throttled", "40P01": "throttled",
		"42P10": "refused", "23502": "refused", "23514": "refused", "42809": "refused", "55000": "refused",
		"55P03": "throttled", "57P03": "throttled", "25006": "throttled",
		"57014": "unknown", "57P01": "unknown", "08006": "unknown", "XX000": "unknown",
		"23505": "unknown", "22001": "refused", "22003": "refused",
	}
	for code, want := range raised {
		_, err := admin.Exec(t.Context(), fmt.Sprintf(
			"DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '%s'; END $$", code))
		if err == nil {
			t.Fatalf("RAISE %s succeeded", code)
		}
		if got := classOf(err); got != want {
			t.Errorf("SQLSTATE %s (%v): class %s, want %s", code, err, got, want)
		}
	}

	// Provoked.
	ping := func(dsn string) error {
		p := newPool(t, dsn, 1)
		return p.Ping(t.Context())
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + freshName("nodb")
	if err := ping(u.String()); classOf(err) != "refused" {
		t.Errorf("missing database: %v; want refused", err)
	}
	// scripts/postgres.sh's server asks for passwords; one that trusts
	// loopback connections takes any.
	if err := ping(withUser(t, dsn, "postgres", "wrong")); err == nil {
		t.Log("the server did not ask for a password: the wrong-password case is not checked")
	} else if classOf(err) != "refused" {
		t.Errorf("wrong password: %v; want refused", err)
	}
	user, pw := newRole(t, admin, "", "")
	exec(t, admin, "ALTER ROLE "+user+" CONNECTION LIMIT 0")
	if err := ping(withUser(t, dsn, user, pw)); classOf(err) != "throttled" {
		t.Errorf("role's connection limit reached: %v; want throttled", err)
	}
}

// BenchmarkWriteEntry measures one conditional replace (an extension).
func BenchmarkWriteEntry(b *testing.B) {
	pool := newPool(b, serverDSN(b), 2)
	d := newDecider(b, pool, freshTable(b, pool), freshName("election"))
	tok := faultproxy.MustWrite(b, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	n := int64(1)
	for b.Loop() {
		tok = faultproxy.MustWrite(b, d, faultproxy.Record(n, fmt.Sprintf("w%d", n), tok))
		n++
	}
}

// BenchmarkReadCurrent measures one read.
func BenchmarkReadCurrent(b *testing.B) {
	pool := newPool(b, serverDSN(b), 2)
	d := newDecider(b, pool, freshTable(b, pool), freshName("election"))
	faultproxy.MustWrite(b, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	for b.Loop() {
		faultproxy.MustRead(b, d)
	}
}

// TestReadOnlyConnectionDropped: a write answered by a read-only session
// (25006, as on a primary demoted to a standby with the connection kept) is
// throttling, and the connection that answered it is not used again, so that
// the retry reaches a writable server once there is one (here: the role's
// sessions are read-only, then no longer; only a new session sees that).
func TestReadOnlyConnectionDropped(t *testing.T) {
	dsn := serverDSN(t)
	admin := newPool(t, dsn, 0)
	table := freshTable(t, admin)
	user, pw := newRole(t, admin, table, "SELECT, INSERT, UPDATE")
	exec(t, admin, "ALTER ROLE "+user+" SET default_transaction_read_only = on")
	d := newDecider(t, newPool(t, withUser(t, dsn, user, pw), 1), table, "e")
	_, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w0", entry.LeaderToken{}))
	if !errors.Is(err, entry.ErrThrottled) || !strings.Contains(err.Error(), "25006") {
		t.Fatalf("WriteEntry on a read-only session: %v; want ErrThrottled with SQLSTATE 25006", err)
	}
	exec(t, admin, "ALTER ROLE "+user+" RESET default_transaction_read_only")
	if _, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w0", entry.LeaderToken{})); err != nil {
		t.Fatalf("WriteEntry after the server became writable: %v; want the read-only connection replaced and the write applied", err)
	}
}

// TestBusyPoolIsThrottled: a write that gets no connection from the pool (the
// application holds them all) sent nothing, so it is throttled (backed off
// and retried), not an unknown outcome that the engine reads back through
// the same busy pool.
func TestBusyPoolIsThrottled(t *testing.T) {
	pool := newPool(t, serverDSN(t), 1)
	table := freshTable(t, pool)
	d := newDecider(t, pool, table, freshName("e"), postgres.WithTimeout(200*time.Millisecond))
	held, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.WriteEntry(t.Context(), faultproxy.Record(0, "w0", entry.LeaderToken{}))
	if !errors.Is(err, entry.ErrThrottled) || !strings.Contains(err.Error(), "no connection from the pool") {
		t.Fatalf("write with the pool's only connection held = %v; want ErrThrottled saying no connection was had", err)
	}
	// The same when the caller's deadline (an engine write's ends with
	// the term) passes before the Decider's timeout.
	d2 := newDecider(t, pool, table, freshName("e"))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = d2.WriteEntry(ctx, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	cancel()
	held.Release()
	if !errors.Is(err, entry.ErrThrottled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write with the pool's only connection held past the caller's deadline = %v; want ErrThrottled, wrapping the deadline", err)
	}
	if _, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w1", entry.LeaderToken{})); err != nil {
		t.Fatalf("write once the connection is back = %v", err)
	}
}
