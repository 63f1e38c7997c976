package postgres_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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

// TestPoolWithItsOwnNotificationHandler: pgx hands a notification to the
// pool's OnNotification handler, if it has one, and the listener's
// connection then gets none of its own. Each is a hint to read, not a crash.
func TestPoolWithItsOwnNotificationHandler(t *testing.T) {
	dsn := serverDSN(t)
	handled := make(chan struct{}, 1)
	pool := newPool(t, dsn, 0, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.OnNotification = func(*pgconn.PgConn, *pgconn.Notification) {
			select {
			case handled <- struct{}{}:
			default:
			}
		}
	})
	table := freshTable(t, pool)
	election := freshName("election")
	waiter := newDecider(t, pool, table, election)
	writer := newDecider(t, newPool(t, dsn, 2), table, election)
	if err := postgres.AwaitListening(t.Context(), waiter); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := waitAsync(ctx, waiter, entry.LeaderToken{})
	tok := faultproxy.MustWrite(t, writer, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	r := <-done
	if r.err != nil || r.e.WriteID != "w0" || !r.e.Token.SameVersion(tok) {
		t.Fatalf("WaitForChange across a write, the pool handling notifications itself = %+v, %v; want w0 at %s", r.e, r.err, tok.Version)
	}
	// The waiter's first read may find w0 before the notification reaches
	// the handler, on the listener's connection: give it until the wait's
	// deadline.
	select {
	case <-handled:
	case <-ctx.Done():
		t.Fatal("the pool's OnNotification handler got no notification: the test no longer shows what it is about")
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

// readCounter is a pgx tracer counting the reads of the row (ReadCurrent's
// statement) sent on a pool's connections: what the server saw.
type readCounter struct{ n atomic.Int64 }

func (c *readCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(data.SQL, "SELECT version, record") {
		c.n.Add(1)
	}
	return ctx
}

func (c *readCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestPushedChanges has many waiters in one process wait on one Decider
// while another client writes: each write must reach them all as the record
// a read would return, without a read, since its notification carries it,
// signed; a record too large for a notification costs one read in all, not
// one per waiter. Waiting again on the record they were handed costs none.
func TestPushedChanges(t *testing.T) {
	const waiters = 20
	dsn := serverDSN(t)
	reads := &readCounter{}
	pool := newPool(t, dsn, 0, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = reads })
	table := freshTable(t, pool)
	election := freshName("election")
	d := newDecider(t, pool, table, election)
	writer := newDecider(t, newPool(t, dsn, 1), table, election)
	tok := faultproxy.MustWrite(t, writer, faultproxy.Record(0, "w0", entry.LeaderToken{}))

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for round := 1; round <= 4; round++ {
		before := reads.n.Load()
		results := make([]<-chan waitResult, waiters)
		for i := range results {
			results[i] = waitAsync(ctx, d, tok)
		}
		if err := postgres.AwaitWaiters(ctx, d, waiters); err != nil {
			t.Fatalf("round %d: waiting for %d waiters: %v", round, waiters, err)
		}
		entering := reads.n.Load() - before
		id := fmt.Sprintf("w%d", round)
		rec := faultproxy.Record(int64(round), id, tok)
		wantReads := int64(0)
		if round == 4 {
			// Too large to push: the notification names the version.
			rec.ConnectionParams = []byte(strings.Repeat("x", 8000))
			wantReads = 1
		}
		next := faultproxy.MustWrite(t, writer, rec)
		var got *entry.RaceEntry
		for i, done := range results {
			r := <-done
			if r.err != nil || r.e.WriteID != id || !r.e.Token.SameVersion(next) {
				t.Fatalf("round %d: waiter %d got %+v, %v; want %s", round, i, r.e, r.err, id)
			}
			got = r.e
		}
		total := reads.n.Load() - before
		t.Logf("round %d: %d reads as %d waiters arrived, %d in all", round, entering, waiters, total)
		// The first round's waiters arrive before anything was read (and
		// share the reads they ask for, which no test can time); later
		// ones wait on the record the listener was handed.
		if round > 1 && entering != 0 {
			t.Errorf("round %d: %d reads as %d waiters arrived on the record the last notification delivered; want none", round, entering, waiters)
		}
		if n := total - entering; n != wantReads {
			t.Errorf("round %d: one write woke %d waiters with %d reads; want %d", round, waiters, n, wantReads)
		}
		want := faultproxy.MustRead(t, writer)
		if !got.Token.CommitTime.Equal(want.Token.CommitTime) || !got.Token.CommitTime.Equal(next.CommitTime) {
			t.Errorf("round %d: waiters were told commit time %v; ReadCurrent says %v, WriteEntry %v",
				round, got.Token.CommitTime, want.Token.CommitTime, next.CommitTime)
		}
		got.Token, want.Token = entry.LeaderToken{}, entry.LeaderToken{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round %d: waiters were told\n%+v\nReadCurrent says\n%+v", round, got, want)
		}
		tok = next
	}
}

// TestUntrustedPushes sends, on the election's channel, payloads shaped like
// a write's but not to be believed: one whose MAC is wrong and one replaying
// a genuine notification of an earlier write, captured by a role listening
// on the channel. A waiter on the current record must be handed neither
// (the listener reads the row instead), only the genuine write that
// follows each.
func TestUntrustedPushes(t *testing.T) {
	dsn := serverDSN(t)
	admin := newPool(t, dsn, 2)
	table := freshTable(t, admin)
	election := freshName("election")
	d := newDecider(t, newPool(t, dsn, 2), table, election)
	spy, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spy.Close(context.Background()) })
	if _, err := spy.Exec(t.Context(), "LISTEN "+pgx.Identifier{postgres.ChannelName(d)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	tok0 := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	tok1 := faultproxy.MustWrite(t, d, faultproxy.Record(1, "w1", tok0))
	var payloads []string
	for range 2 {
		n, err := spy.WaitForNotification(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, n.Payload)
	}
	genuine := payloads[1] // w0 -> w1
	if !strings.HasPrefix(genuine, "lev1 "+tok0.Version+" "+tok1.Version+" ") {
		t.Fatalf("notification of w1 = %q; want it to name versions %s and %s", genuine, tok0.Version, tok1.Version)
	}
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	// The listener reads w1 for a waiter on w0, and knows the row's secret.
	if r := <-waitAsync(t.Context(), d, tok0); r.err != nil || !r.e.Token.SameVersion(tok1) {
		t.Fatalf("WaitForChange(w0) = %+v, %v; want w1", r.e, r.err)
	}
	tok2 := faultproxy.MustWrite(t, d, faultproxy.Record(2, "w2", tok1))
	if r := <-waitAsync(t.Context(), d, tok1); r.err != nil || !r.e.Token.SameVersion(tok2) {
		t.Fatalf("WaitForChange(w1) = %+v, %v; want w2", r.e, r.err)
	}

	// w2 -> a forged w3: the right chain, a MAC made without the secret
	// (first, while the listener holds w2).
	rec := faultproxy.Record(3, "forged", tok2)
	body, err := entry.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	forged := fmt.Sprintf("lev1 %s 42 %d %s %s", tok2.Version, time.Now().UnixMicro(),
		base64.StdEncoding.EncodeToString(body), strings.Repeat("ab", 32))
	tok := tok2
	for i, c := range []struct{ what, payload string }{{"forged", forged}, {"replayed", genuine}} {
		done := waitAsync(t.Context(), d, tok)
		// Each on a listener with no read asked for, which would make it
		// ignore the payload anyway.
		if err := postgres.AwaitWaiters(t.Context(), d, 1); err != nil {
			t.Fatal(err)
		}
		exec(t, admin, "SELECT pg_notify($1, $2)", postgres.ChannelName(d), c.payload)
		// A genuine write after it: notifications arrive in commit order,
		// so a waiter handed anything but this write believed the payload.
		id := fmt.Sprintf("after-%s", c.what)
		next := faultproxy.MustWrite(t, d, faultproxy.Record(int64(3+i), id, tok))
		if r := <-done; r.err != nil || r.e.WriteID != id || !r.e.Token.SameVersion(next) {
			t.Fatalf("WaitForChange after a %s notification and a write = %+v, %v; want the write, %s", c.what, r.e, r.err, id)
		}
		tok = next
	}
}

// TestWaitForChangeNewerToken checks that a waiter whose token is newer
// than the record the listener last read (a write whose notification has
// not arrived, here one sent none) is not handed that older record.
func TestWaitForChangeNewerToken(t *testing.T) {
	dsn := serverDSN(t)
	admin := newPool(t, dsn, 2)
	table := freshTable(t, admin)
	election := freshName("election")
	d := newDecider(t, newPool(t, dsn, 4), table, election)
	tok1 := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	// The listener reads w0 for a waiter on the empty token.
	if r := <-waitAsync(t.Context(), d, entry.LeaderToken{}); r.err != nil || !r.e.Token.SameVersion(tok1) {
		t.Fatalf("WaitForChange(no record) = %+v, %v; want w0", r.e, r.err)
	}
	// A change without a notification: as if its notification were late.
	exec(t, admin, "UPDATE "+pgx.Identifier{table}.Sanitize()+" SET version = version + 1 WHERE name = $1", election)
	tok2 := faultproxy.MustRead(t, d).Token
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if r := <-waitAsync(ctx, d, tok2); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange(the current version %s) = %+v, %v; want it to wait until its deadline", tok2.Version, r.e, r.err)
	}
	// The waiter's read found tok2: the older token is answered at once.
	if r := <-waitAsync(t.Context(), d, tok1); r.err != nil || !r.e.Token.SameVersion(tok2) {
		t.Fatalf("WaitForChange(%s) = %+v, %v; want version %s", tok1.Version, r.e, r.err, tok2.Version)
	}
}

// TestWaitVouchesOnlyWhenListening: a wait that ends before the listener
// could tell whether the row changed (it could not connect, or its read of
// the row did not come back) does not wrap the deadline, which would vouch
// that nothing changed (see leaderelection.ChangeNotifier); a wait whose
// token the listener read ends with it.
func TestWaitVouchesOnlyWhenListening(t *testing.T) {
	dsn := serverDSN(t)
	table := freshTable(t, newPool(t, dsn, 1))
	election := freshName("election")
	writer := newDecider(t, newPool(t, dsn, 2), table, election)
	tok := faultproxy.MustWrite(t, writer, faultproxy.Record(0, "w0", entry.LeaderToken{}))

	pool := newPool(t, dsn, 1)
	d := newDecider(t, pool, table, election)
	release := holdConn(t, pool) // the listener cannot connect
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err := d.WaitForChange(ctx, tok)
	cancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange with the listener unable to connect = %v; want an error that does not wrap the deadline", err)
	}
	release()
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatal(err)
	}

	// Listening (on a connection the listener took from the pool for
	// good), but its read of the row, which a token it has not read
	// needs, waits for the pool's connection.
	release = holdConn(t, pool)
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = d.WaitForChange(ctx, tok)
	cancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange whose read of the row could not run = %v; want an error that does not wrap the deadline", err)
	}
	release()

	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = d.WaitForChange(ctx, tok)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange on the current version, listening = %v; want the deadline", err)
	}
}

// TestWaitVouchesOnlyWhileQuiet: a waiter the listener vouched for, ended
// while the read that a notification it could not verify asked for is
// still under way (held here: the pool's one connection is taken), does not
// wrap its context's error, which would vouch that nothing changed (see
// leaderelection.ChangeNotifier). Nor does a waiter whose own read timed
// out (WithTimeout) wrap that read's deadline.
func TestWaitVouchesOnlyWhileQuiet(t *testing.T) {
	dsn := serverDSN(t)
	admin := newPool(t, dsn, 2)
	table := freshTable(t, admin)
	election := freshName("election")
	writer := newDecider(t, newPool(t, dsn, 2), table, election)
	tok := faultproxy.MustWrite(t, writer, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	pool := newPool(t, dsn, 1)
	d := newDecider(t, pool, table, election, postgres.WithTimeout(time.Second))
	if err := postgres.AwaitListening(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := waitAsync(ctx, d, tok)
	// The listener has read w0 for it and vouches, with no read asked for.
	if err := postgres.AwaitWaiters(t.Context(), d, 1); err != nil {
		t.Fatal(err)
	}
	release := holdConn(t, pool)
	exec(t, admin, "SELECT pg_notify($1, 'a hint')", postgres.ChannelName(d))
	if err := postgres.AwaitReadAsked(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	cancel()
	r := <-done
	if r.err == nil || errors.Is(r.err, context.Canceled) {
		t.Errorf("WaitForChange ended while the read a hint asked for was under way = %+v, %v; want an error that does not wrap the context's", r.e, r.err)
	}
	release()

	// A token the listener has not read costs a read, which times out.
	release = holdConn(t, pool)
	r = <-waitAsync(t.Context(), d, entry.LeaderToken{Version: "1"})
	release()
	if r.err == nil || errors.Is(r.err, context.DeadlineExceeded) || !strings.Contains(r.err.Error(), "no connection from the pool") {
		t.Fatalf("WaitForChange whose read timed out = %+v, %v; want that read's error, not wrapping its deadline", r.e, r.err)
	}
}

// holdConn takes one of pool's connections and returns its release, which
// runs at the latest when the test ends, before a Decider on pool closes
// (Close waits for its listener).
func holdConn(t *testing.T, pool *pgxpool.Pool) func() {
	t.Helper()
	c, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(c.Release)
	t.Cleanup(release)
	return release
}
