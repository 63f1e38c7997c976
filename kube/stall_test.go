package kube_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/kube"
)

// stall holds back, while held, what the API server sends on a client's
// watches (every byte of each stream, its end included), as a connection
// that died without a word, or a proxy that keeps the client's side open,
// would; and, while opening is held, the opening of new watches. Other
// requests pass.
type stall struct {
	mu      sync.Mutex
	held    chan struct{} // closed on release; nil while not held
	opening chan struct{} // likewise, for opening watches
	reading chan struct{} // likewise, for GETs of the Lease
}

// wrap returns a copy of cfg whose watches s can stall.
func (s *stall) wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if requestKind(req) == kindGet {
				if gate := s.gate(&s.reading); gate != nil {
					select {
					case <-gate:
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
				}
			}
			if requestKind(req) != kindWatch {
				return rt.RoundTrip(req)
			}
			if gate := s.gate(&s.opening); gate != nil {
				select {
				case <-gate:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body = &stalledBody{ReadCloser: resp.Body, s: s, closed: make(chan struct{})}
			}
			return resp, err
		})
	})
	return c
}

func (s *stall) gate(g *chan struct{}) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *g
}

func (s *stall) set(g *chan struct{}, hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case hold && *g == nil:
		*g = make(chan struct{})
	case !hold && *g != nil:
		close(*g)
		*g = nil
	}
}

func (s *stall) hold(t *testing.T) {
	s.set(&s.held, true)
	t.Cleanup(func() { s.set(&s.held, false) })
}

func (s *stall) release() { s.set(&s.held, false) }

func (s *stall) holdOpening(t *testing.T) {
	s.set(&s.opening, true)
	t.Cleanup(func() { s.set(&s.opening, false) })
}

func (s *stall) releaseOpening() { s.set(&s.opening, false) }

// holdReads holds GETs of the Lease (never sent while held), as a stalled
// connection or proxy would.
func (s *stall) holdReads(t *testing.T) {
	s.set(&s.reading, true)
	t.Cleanup(func() { s.set(&s.reading, false) })
}

func (s *stall) releaseReads() { s.set(&s.reading, false) }

type stalledBody struct {
	io.ReadCloser
	s         *stall
	closed    chan struct{}
	closeOnce sync.Once
}

// Read returns what the server sent once s is not held, or as soon as the
// body is closed.
func (b *stalledBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if gate := b.s.gate(&b.s.held); gate != nil {
		select {
		case <-gate:
		case <-b.closed:
			return 0, io.ErrClosedPipe
		}
	}
	return n, err
}

func (b *stalledBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}

// stalledDecider is a Decider whose watches st can stall, counting its
// requests in sent, on a fresh Lease; and one reaching the API server
// directly, on the same Lease.
func stalledDecider(t *testing.T) (d, direct *kube.Decider, st *stall, sent *requests) {
	cfg := adminConfig(t)
	name := freshLease()
	st, sent = &stall{}, &requests{}
	return newDecider(t, sent.counting(st.wrap(cfg)), name), newDecider(t, cfg, name), st, sent
}

// TestWaitOnAbsenceWhileWatchLags: after the Lease was deleted, a wait on
// its absence (the zero token) while the watch has yet to deliver the
// deletion must not return the deleted Lease as a change: the engine's
// watcher drops it as old news and waits again at once, in a loop with no
// pause for as long as the watch lags.
func TestWaitOnAbsenceWhileWatchLags(t *testing.T) {
	d, direct, st, sent := stalledDecider(t)
	faultproxy.MustWrite(t, direct, faultproxy.Record(1, "w1", entry.LeaderToken{}))
	// The first wait starts the watch, whose LIST finds the Lease.
	if e, err := d.WaitForChange(t.Context(), entry.LeaderToken{}); err != nil || e.WriteID != "w1" {
		t.Fatalf("WaitForChange starting the watch = %+v, %v; want w1", e, err)
	}
	st.hold(t)
	if err := clientset(t, adminConfig(t)).CoordinationV1().Leases(namespace).Delete(t.Context(), d.Name(), deleteOptions()); err != nil {
		t.Fatal(err)
	}
	absent := faultproxy.MustRead(t, d)
	if absent.ElectionNumber != entry.NoElections {
		t.Fatalf("read after the deletion: %+v", absent)
	}
	gets := sent.count(kindGet)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	e, err := d.WaitForChange(ctx, absent.Token)
	cancel()
	if err == nil {
		t.Fatalf("WaitForChange on the absence, with the deletion not yet delivered by the watch = %+v; want it to block (the Lease is deleted)", e)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForChange on the absence = %v; want the deadline (a read found it current, and the watch was up)", err)
	}
	if n := sent.count(kindGet) - gets; n != 1 {
		t.Errorf("the wait sent %d GETs; want 1", n)
	}

	// Once the watch catches up, a new Lease is pushed to a waiter on the
	// absence.
	st.release()
	done := waitAsync(t, d, absent.Token, "WaitForChange on the absence")
	faultproxy.MustWrite(t, direct, faultproxy.Record(2, "w2", entry.LeaderToken{}))
	if e := <-done; e == nil || e.WriteID != "w2" {
		t.Fatalf("WaitForChange on the absence returned %+v; want the new Lease w2", e)
	}
}

// countingNotifier tells of each WaitForChange call on waits (dropping
// what does not fit).
type countingNotifier struct {
	*kube.Decider
	waits chan struct{}
}

func (c *countingNotifier) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	select {
	case c.waits <- struct{}{}:
	default:
	}
	return c.Decider.WaitForChange(ctx, tok)
}

// TestWatchAfterDeletionWhileWatchLags runs the engine's watcher
// (WatchConfig.Watch) over a deletion that the Decider's watch delivers
// late: once the watcher has reported the deletion, it waits on the absence,
// and must not be answered at once with the deleted Lease, which it drops as
// old news before waiting again, in a loop with no pause. A read found the
// deletion that the channel had vouched was not there, so the watcher takes
// the channel for deaf and waits a PollInterval (50 ms) at most until the
// channel brings a change, and otherwise up to 8: within a second at most
// about 20 waits, not hundreds.
func TestWatchAfterDeletionWhileWatchLags(t *testing.T) {
	d, direct, st, _ := stalledDecider(t)
	n := &countingNotifier{Decider: d, waits: make(chan struct{}, 1000)}
	changes := make(chan leaderelection.ChangeKind, 16)
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan error, 1)
	go func() {
		ended <- leaderelection.WatchConfig{Decider: n, PollInterval: 50 * time.Millisecond}.Watch(ctx, func(_ context.Context, c leaderelection.Change) {
			changes <- c.Kind
		})
	}()
	defer func() {
		cancel()
		<-ended
	}()
	next := func(want leaderelection.ChangeKind) {
		t.Helper()
		select {
		case k := <-changes:
			if k != want {
				t.Fatalf("watcher reported %v; want %v", k, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("watcher did not report %v within 20s", want)
		}
	}
	faultproxy.MustWrite(t, direct, faultproxy.Record(1, "w1", entry.LeaderToken{}))
	next(leaderelection.LeaderElected)

	st.hold(t)
	if err := clientset(t, adminConfig(t)).CoordinationV1().Leases(namespace).Delete(t.Context(), d.Name(), deleteOptions()); err != nil {
		t.Fatal(err)
	}
	next(leaderelection.RecordDeleted)
	for len(n.waits) > 0 {
		<-n.waits
	}
	// Count the waits over a second, or until there are too many.
	const limit = 50
	window := time.NewTimer(time.Second)
	defer window.Stop()
	waits := 0
count:
	for waits < limit {
		select {
		case <-n.waits:
			waits++
		case <-window.C:
			break count
		}
	}
	if waits >= 30 {
		t.Errorf("the watcher waited %d times (counting up to %d) in the second after it reported the deletion, with the Decider's watch lagging; want one per PollInterval (50 ms) at most", waits, limit)
	}
}

// TestStuckWatchIsReplaced stalls the watch's stream, as a connection that
// died without a word (HTTP/2 health checks off, a proxy keeping it open)
// would: the server's close at its timeout never arrives, and client-go sets
// no deadline on a watch. The watcher must replace it by its own deadline
// (the server's timeout plus a margin), or once it has been silent, not even
// a bookmark, for too long.
func TestStuckWatchIsReplaced(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		timeout, margin, silence, within time.Duration
	}{
		{name: "deadline", timeout: 2 * time.Second, margin: time.Second, silence: time.Hour, within: 20 * time.Second},
		{name: "silence", timeout: time.Hour, margin: time.Hour, silence: 2 * time.Second, within: 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, direct, st, sent := stalledDecider(t)
			kube.SetWatchTiming(d, tc.timeout, tc.margin, tc.silence, time.Minute)
			tok := faultproxy.MustWrite(t, direct, faultproxy.Record(1, "w1", entry.LeaderToken{}))
			if e, err := d.WaitForChange(t.Context(), entry.LeaderToken{}); err != nil || e.WriteID != "w1" {
				t.Fatalf("WaitForChange starting the watch = %+v, %v; want w1", e, err)
			}
			st.hold(t)
			started := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), tc.within)
			defer cancel()
			if !sent.await(ctx, func() bool { return sent.count(kindWatch) >= 2 }) {
				t.Fatalf("the stalled watch was not replaced within %v: %v", tc.within, sent)
			}
			t.Logf("stalled watch replaced after %v", time.Since(started).Round(time.Millisecond))
			// The replacement, once its stream flows, pushes changes.
			st.release()
			done := waitAsync(t, d, tok, "WaitForChange after the replacement")
			faultproxy.MustWrite(t, direct, faultproxy.Record(2, "w2", tok))
			if e := <-done; e == nil || e.WriteID != "w2" {
				t.Fatalf("WaitForChange after the replacement returned %+v; want w2", e)
			}
		})
	}
}

// TestWaitBetweenWatchesVouchesNothing holds the opening of the watch that
// replaces one the server ended: meanwhile no watch runs, and a wait that
// ends must not wrap its context's error, which would vouch that nothing
// changed; once the grace for the replacement is over, waits fail at once,
// so that the engine polls.
func TestWaitBetweenWatchesVouchesNothing(t *testing.T) {
	d, direct, st, sent := stalledDecider(t)
	const grace = 3 * time.Second
	kube.SetWatchTiming(d, 2*time.Second, time.Minute, time.Hour, grace)
	tok := faultproxy.MustWrite(t, direct, faultproxy.Record(1, "w1", entry.LeaderToken{}))
	if e, err := d.WaitForChange(t.Context(), entry.LeaderToken{}); err != nil || e.WriteID != "w1" {
		t.Fatalf("WaitForChange starting the watch = %+v, %v; want w1", e, err)
	}
	// A wait that begins while the watch runs and ends after it did.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	across := make(chan error, 1)
	go func() {
		_, err := d.WaitForChange(ctx, tok)
		across <- err
	}()
	st.holdOpening(t)
	opening, cancelOpening := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancelOpening()
	if !sent.await(opening, func() bool { return sent.count(kindWatch) >= 2 }) {
		t.Fatalf("the server did not end the watch: %v", sent)
	}
	gap := time.Now()
	cancel()
	if err := <-across; err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("a wait that began while watching and ended between watches = %v; want an error that does not wrap the context's", err)
	}
	short, cancelShort := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err := d.WaitForChange(short, tok)
	cancelShort()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a wait between watches = %v; want an error that does not wrap the deadline", err)
	}
	long, cancelLong := context.WithTimeout(t.Context(), time.Minute)
	_, err = d.WaitForChange(long, tok)
	cancelLong()
	if err == nil || errors.Is(err, context.DeadlineExceeded) || time.Since(gap) > grace+5*time.Second {
		t.Errorf("a wait between watches, %v after the watch ended, = %v; want an error at the end of the grace (%v)", time.Since(gap).Round(time.Millisecond), err, grace)
	}
	t.Logf("after %v: %v", time.Since(gap).Round(time.Millisecond), err)

	// Once the replacement opens, waits vouch again and are answered
	// from it.
	st.releaseOpening()
	for back := time.Now(); ; {
		// Polling, as the engine would while waits fail.
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err := d.WaitForChange(ctx, tok)
		<-ctx.Done()
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if time.Since(back) > 10*time.Second {
			t.Fatalf("WaitForChange 10s after the replacement could open = %v; want the deadline; %v", err, sent)
		}
	}
	done := waitAsync(t, d, tok, "WaitForChange after the replacement")
	faultproxy.MustWrite(t, direct, faultproxy.Record(2, "w2", tok))
	if e := <-done; e == nil || e.WriteID != "w2" {
		t.Fatalf("WaitForChange after the replacement returned %+v; want w2", e)
	}
}

// TestWaitReadIsBounded: the GET a wait sends for a token its watch has not
// seen (written so recently that its event is on the way, here held back)
// hangs, as on a connection dropped without a reset or behind a stalled
// proxy. The wait must give up on it within seconds, with an error that does
// not wrap its context's (it vouches for nothing), so that the engine
// reads and polls on its own, rather than stay deaf until its context ends.
func TestWaitReadIsBounded(t *testing.T) {
	d, direct, st, sent := stalledDecider(t)
	tok := faultproxy.MustWrite(t, direct, faultproxy.Record(1, "w1", entry.LeaderToken{}))
	if e, err := d.WaitForChange(t.Context(), entry.LeaderToken{}); err != nil || e.WriteID != "w1" {
		t.Fatalf("WaitForChange starting the watch = %+v, %v; want w1", e, err)
	}
	st.hold(t)
	tok2 := faultproxy.MustWrite(t, direct, faultproxy.Record(2, "w2", tok))
	st.holdReads(t)
	gets := sent.count(kindGet)
	const patience = 30 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	began := time.Now()
	_, err := d.WaitForChange(ctx, tok2)
	took := time.Since(began)
	if sent.count(kindGet) == gets {
		t.Fatalf("the wait on a token the watch has not seen sent no GET (%v); the test needs one", sent)
	}
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || took > patience/2 {
		t.Fatalf("WaitForChange with its GET hung = %v after %v; want an error that does not wrap the context's, within seconds", err, took.Round(time.Millisecond))
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)

	// Once reads and the watch flow again, waits are answered.
	st.releaseReads()
	st.release()
	done := waitAsync(t, d, tok2, "WaitForChange after the hang")
	faultproxy.MustWrite(t, direct, faultproxy.Record(3, "w3", tok2))
	if e := <-done; e == nil || e.WriteID != "w3" {
		t.Fatalf("WaitForChange after the hang returned %+v; want w3", e)
	}
}
