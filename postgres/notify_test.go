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

type waitResult struct {
	e   *entry.RaceEntry
	err error
}

func waitAsync(ctx context.Context, d *postgres.Decider, tok entry.LeaderToken) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		e, err := d.WaitForChange(ctx, tok)
		done <- waitResult{e, err}
	}()
	return done
}

// TestPushAcrossClients has a writer on one pool wake a waiter on another,
// naming the table without and with its schema: both share a channel.
func TestPushAcrossClients(t *testing.T) {
	dsn := serverDSN(t)
	table := freshTable(t, newPool(t, dsn, 1))
	election := freshName("election")
	writer := newDecider(t, newPool(t, dsn, 2), table, election)
	waiter := newDecider(t, newPool(t, dsn, 2), "public."+table, election)
	if err := postgres.AwaitListening(t.Context(), waiter); err != nil {
		t.Fatal(err)
	}
	done := waitAsync(t.Context(), waiter, entry.LeaderToken{})
	tok := faultproxy.MustWrite(t, writer, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	r := <-done
	if r.err != nil || r.e.WriteID != "w0" || !r.e.Token.SameVersion(tok) {
		t.Fatalf("WaitForChange across a write by another client = %+v, %v; want w0 at %s", r.e, r.err, tok.Version)
	}
}

// TestForgedNotification checks that a NOTIFY from anyone on the election's
// channel, with a payload that looks like a version, does not make
// WaitForChange report a change that did not happen.
func TestForgedNotification(t *testing.T) {
	dsn := serverDSN(t)
	admin := newPool(t, dsn, 2)
	table := freshTable(t, admin)
	d := newDecider(t, newPool(t, dsn, 2), table, freshName("election"))
	tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	done := waitAsync(ctx, d, tok)
	for range 3 {
		exec(t, admin, "SELECT pg_notify($1, '12345')", postgres.ChannelName(d))
	}
	r := <-done
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange after forged notifications = %+v, %v; want it to keep waiting until its deadline", r.e, r.err)
	}
}

// TestListenerKilled terminates the listener's server process: WaitForChange
// must fail promptly while the listener is down, so that the engine polls,
// and deliver changes again once it has reconnected.
func TestListenerKilled(t *testing.T) {
	dsn := serverDSN(t)
	admin := newPool(t, dsn, 2)
	table := freshTable(t, admin)
	// A reconnection delay long enough for the test to see the listener
	// down, whatever the machine's load.
	d := newDecider(t, newPool(t, dsn, 2), table, freshName("election"),
		postgres.WithReconnectBackoff(4*time.Second, 8*time.Second))
	tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	pid := postgres.ListenerPID(d)
	if pid == 0 {
		t.Fatal("no listener pid while listening")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := waitAsync(ctx, d, tok)
	var killed bool
	if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
	}
	start := time.Now()
	r := <-done
	if r.err == nil || errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange while the listener was killed = %+v, %v; want an error at once", r.e, r.err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("WaitForChange took %v to notice the listener was killed", took)
	}
	t.Logf("while killed: %v", r.err)
	// While it is down, a call fails at once.
	if _, err := d.WaitForChange(ctx, tok); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange while the listener is down: %v; want an error at once", err)
	}

	if err := postgres.AwaitListening(ctx, d); err != nil {
		t.Fatalf("listener did not reconnect: %v", err)
	}
	if postgres.ListenerPID(d) == pid {
		t.Fatal("listener reconnected on the killed process")
	}
	done = waitAsync(ctx, d, tok)
	tok2 := faultproxy.MustWrite(t, d, faultproxy.Record(1, "w1", tok))
	r = <-done
	if r.err != nil || !r.e.Token.SameVersion(tok2) {
		t.Fatalf("WaitForChange after the listener reconnected = %+v, %v; want w1", r.e, r.err)
	}
}

// TestClose checks that WaitForChange fails after Close and that Close wakes
// a waiter.
func TestClose(t *testing.T) {
	dsn := serverDSN(t)
	pool := newPool(t, dsn, 2)
	d := newDecider(t, pool, freshTable(t, pool), freshName("election"))
	done := waitAsync(t.Context(), d, entry.LeaderToken{})
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if r := <-done; r.err == nil {
		t.Fatalf("waiter after Close = %+v, %v; want an error", r.e, r.err)
	}
	if _, err := d.WaitForChange(t.Context(), entry.LeaderToken{}); err == nil {
		t.Fatal("WaitForChange after Close succeeded")
	}
	faultproxy.MustRead(t, d) // the caller's pool still works
}
