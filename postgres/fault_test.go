package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/postgres"
)

// proxied returns a proxy to the server, a Decider whose one-connection pool
// goes through it, and a Decider reaching the server directly, on one fresh
// row. The proxy counts a request each time the client speaks after the
// server did, which fits PostgreSQL's protocol: pgx sends a statement (Bind,
// Execute, Sync) and waits for the whole answer.
func proxied(t *testing.T) (*faultproxy.Proxy, *postgres.Decider, *postgres.Decider) {
	dsn := serverDSN(t)
	direct := newPool(t, dsn, 2)
	table := freshTable(t, direct)
	election := freshName("election")
	p := faultproxy.Start(t, hostPort(t, dsn))
	return p, newDecider(t, newPool(t, withHost(t, dsn, p.Addr()), 1), table, election), newDecider(t, direct, table, election)
}

// warmUp makes d's connection prepare both write statements (on another
// row), so that a later write is a single request the proxy can act on.
func warmUp(t *testing.T, d *postgres.Decider) {
	t.Helper()
	other, err := postgres.New(postgres.PoolOf(d), postgres.TableOf(d), "warm-up-"+freshName("e"))
	if err != nil {
		t.Fatal(err)
	}
	tok := faultproxy.MustWrite(t, other, faultproxy.Record(0, "warm0", entry.LeaderToken{}))
	faultproxy.MustWrite(t, other, faultproxy.Record(1, "warm1", tok))
	faultproxy.MustRead(t, other)
}

// TestAmbiguousWrite drops the answer to a write the server applied: the
// error must not be a lost race, nor a refusal, and reading back shows the
// write. The pool replaces the broken connection.
func TestAmbiguousWrite(t *testing.T) {
	faultproxy.AmbiguousWrites(t, func(t *testing.T) *faultproxy.Faulty {
		p, d, direct := proxied(t)
		warmUp(t, d)
		return &faultproxy.Faulty{Proxy: p, D: d, Direct: direct}
	}, entry.ErrRaceLost, entry.ErrRefused, entry.ErrThrottled)
}

// TestResetWrite resets the connection before the write reaches the server:
// an error of unknown outcome, and reading back shows it was not applied.
func TestResetWrite(t *testing.T) {
	p, d, direct := proxied(t)
	warmUp(t, d)
	tok := faultproxy.MustWrite(t, direct, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	p.ResetNext(1)
	_, err := d.WriteEntry(t.Context(), faultproxy.Record(1, "w-reset", tok))
	if err == nil || errors.Is(err, entry.ErrRaceLost) || errors.Is(err, entry.ErrRefused) || errors.Is(err, entry.ErrThrottled) {
		t.Fatalf("WriteEntry on a reset connection: %v; want an error of unknown outcome", err)
	}
	if got := faultproxy.MustRead(t, direct); got.WriteID != "w0" {
		t.Fatalf("read back %+v; the reset write never reached the server, want w0", got)
	}
	faultproxy.MustWrite(t, d, faultproxy.Record(1, "w1", tok))
}

// TestCut checks that a client cut off from the server fails promptly, not
// with a lost race, and recovers once access returns; its listener goes down
// and comes back.
func TestCut(t *testing.T) {
	p, d, direct := proxied(t)
	tok := faultproxy.MustWrite(t, direct, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	p.SetCut(true)
	const deadline = 2 * time.Second
	for _, op := range []string{"read", "write", "wait"} {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		var err error
		switch op {
		case "read":
			_, err = d.ReadCurrent(ctx)
		case "write":
			_, err = d.WriteEntry(ctx, faultproxy.Record(1, "w-cut", tok))
		case "wait":
			_, err = d.WaitForChange(ctx, tok)
		}
		cancel()
		if err == nil || errors.Is(err, entry.ErrRaceLost) {
			t.Errorf("%s while cut: %v; want an error", op, err)
		}
		if op == "wait" && errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitForChange while cut waited for its deadline (%v); want an error at once", err)
		}
	}
	p.SetCut(false)
	if got := faultproxy.MustRead(t, d); got.WriteID != "w0" {
		t.Fatalf("read %+v after the cut, want w0", got)
	}
	faultproxy.MustWrite(t, d, faultproxy.Record(1, "w1", tok))
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatalf("listener did not come back: %v", err)
	}
}

// TestLatency checks that a slow server makes calls fail with their
// deadline.
func TestLatency(t *testing.T) {
	p, d, _ := proxied(t)
	faultproxy.MustRead(t, d) // connect first: the deadline is for the statement
	faultproxy.MissesDeadline(t, p, d, 300*time.Millisecond)
	p.SetLatency(0)
	faultproxy.MustRead(t, d)
}
