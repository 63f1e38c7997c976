package gcs_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/gcs"
	"github.com/racedecider/leaderelection/internal/faultproxy"
)

// proxied returns a decider whose client reaches the emulator through a
// fault proxy, and a decider reaching it directly, on one fresh object.
func proxied(t *testing.T) (*faultproxy.Proxy, *gcs.Decider, *gcs.Decider) {
	em := newEmulator(t)
	p := faultproxy.Start(t, em.addr)
	object := freshObject(t)
	return p, newDecider(t, newClient(t, p.Addr()), object), newDecider(t, newClient(t, em.addr), object)
}

// TestAmbiguousWrite drops the response to a write the emulator applied.
// WriteEntry retries, the retry finds the object changed (by the first
// attempt), and WriteEntry must not report that as a lost race: the outcome
// is unknown, and reading back shows the write was applied.
func TestAmbiguousWrite(t *testing.T) {
	faultproxy.AmbiguousWrites(t, func(t *testing.T) *faultproxy.Faulty {
		p, d, direct := proxied(t)
		return &faultproxy.Faulty{Proxy: p, D: d, Direct: direct}
	}, entry.ErrRaceLost)
}

// TestDroppedReadIsRetried drops the response to a read: the storage client
// retries reads on its own.
func TestDroppedReadIsRetried(t *testing.T) {
	p, d, direct := proxied(t)
	faultproxy.MustWrite(t, direct, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	p.DropResponses(1)
	if got := faultproxy.MustRead(t, d); got.WriteID != "w0" {
		t.Fatalf("read %+v, want w0", got)
	}
	if st := p.Stats(); st.DroppedResponses != 1 {
		t.Errorf("proxy stats %+v, want 1 dropped response", st)
	}
}

// TestResetWrite resets connections before the request reaches the emulator.
// One reset: WriteEntry retries and succeeds. Resets on every attempt: after
// maxAttempts (4), an error of unknown outcome, after which reading back
// shows the write was not applied.
func TestResetWrite(t *testing.T) {
	p, d, _ := proxied(t)
	p.ResetNext(1)
	tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	if st := p.Stats(); st.Resets != 1 {
		t.Errorf("proxy stats %+v, want 1 reset", st)
	}
	if got := faultproxy.MustRead(t, d); got.WriteID != "w0" || got.Token.Version != tok.Version {
		t.Fatalf("read %+v after a retried write, want w0 at %s", got, tok.Version)
	}

	p.ResetNext(1 << 20)
	_, err := d.WriteEntry(t.Context(), faultproxy.Record(1, "w1", tok))
	if err == nil || classOf(err) != errUnknown {
		t.Fatalf("WriteEntry with every connection reset: %v; want an error of unknown outcome", err)
	}
	if st := p.Stats(); st.Resets != 1+4 {
		t.Errorf("proxy stats %+v: want 4 more resets, one per attempt", st)
	}
	p.ResetNext(0)
	if got := faultproxy.MustRead(t, d); got.WriteID != "w0" {
		t.Fatalf("read %+v; the reset writes were never forwarded, want w0", got)
	}
	// The outcome is settled by reading back; a new write on the read token
	// goes through.
	faultproxy.MustWrite(t, d, faultproxy.Record(1, "w1-again", tok))
}

// TestCut checks that a client cut off from the store gets errors of
// unknown outcome, promptly (its attempts run out, or its deadline), not a
// hang, and recovers once access returns.
func TestCut(t *testing.T) {
	p, d, direct := proxied(t)
	tok := faultproxy.MustWrite(t, direct, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	faultproxy.MustRead(t, d) // open a keep-alive connection for the cut to close
	p.SetCut(true)

	const deadline = 500 * time.Millisecond
	for _, op := range []string{"read", "write"} {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		start := time.Now()
		var err error
		if op == "read" {
			_, err = d.ReadCurrent(ctx)
		} else {
			_, err = d.WriteEntry(ctx, faultproxy.Record(1, "w-cut", tok))
		}
		cancel()
		took := time.Since(start)
		if err == nil || classOf(err) != errUnknown {
			t.Errorf("%s while cut: %v; want an error of unknown outcome", op, err)
		}
		if took > deadline+2*time.Second {
			t.Errorf("%s while cut took %v with a %v deadline", op, took, deadline)
		}
	}
	p.SetCut(false)
	if got := faultproxy.MustRead(t, d); got.WriteID != "w0" {
		t.Fatalf("read %+v after the cut, want w0", got)
	}
	faultproxy.MustWrite(t, d, faultproxy.Record(1, "w1", tok))
}

// TestLatency checks that a slow store makes calls fail with their deadline
// and succeed with a longer one.
func TestLatency(t *testing.T) {
	p, d, _ := proxied(t)
	faultproxy.MissesDeadline(t, p, d, 200*time.Millisecond)
	// Either way a read with a sufficient deadline succeeds.
	p.SetLatency(10 * time.Millisecond)
	faultproxy.MustRead(t, d)
}

// TestTransientErrors checks the write retry rules with HTTP errors injected
// in front of the emulator.
func TestTransientErrors(t *testing.T) {
	em := newFaultyEmulator(t)
	c := newClient(t, em.addr)

	t.Run("RetriedUntilSuccess", func(t *testing.T) {
		// maxAttempts is 4: three transient errors and a success.
		d := newDecider(t, c, freshObject(t))
		before := em.inject.uploadCount()
		em.inject.queue(fault{status: http.StatusServiceUnavailable}, fault{status: http.StatusInternalServerError},
			fault{status: http.StatusRequestTimeout})
		faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
		if n := em.inject.uploadCount() - before; n != 4 {
			t.Errorf("%d upload attempts, want 4 (three transient errors, then success)", n)
		}
	})

	t.Run("LostRaceNotRetried", func(t *testing.T) {
		d := newDecider(t, c, freshObject(t))
		faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
		before := em.inject.uploadCount()
		_, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w-late", entry.LeaderToken{}))
		if !errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("create over an existing record: %v; want ErrRaceLost", err)
		}
		if n := em.inject.uploadCount() - before; n != 1 {
			t.Errorf("%d upload attempts for a lost race, want 1: a 412 is never retried", n)
		}
	})

	t.Run("ThrottledNotRetried", func(t *testing.T) {
		// 429: not applied, and another attempt within the object's write
		// interval would be throttled too; the engine waits it out.
		d := newDecider(t, c, freshObject(t))
		tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
		em.inject.queue(fault{status: http.StatusTooManyRequests})
		before := em.inject.uploadCount()
		_, err := d.WriteEntry(t.Context(), faultproxy.Record(1, "w1", tok))
		if !errors.Is(err, entry.ErrThrottled) {
			t.Fatalf("429: %v; want ErrThrottled", err)
		}
		if n := em.inject.uploadCount() - before; n != 1 {
			t.Errorf("%d upload attempts for a throttled write, want 1", n)
		}
	})

	t.Run("AppliedThen503", func(t *testing.T) {
		// The write is applied but the client is told 503: the retry's
		// 412 must not be reported as a lost race.
		d := newDecider(t, c, freshObject(t))
		tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
		em.inject.queue(fault{status: http.StatusServiceUnavailable, apply: true})
		_, err := d.WriteEntry(t.Context(), faultproxy.Record(1, "w1", tok))
		if err == nil || errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("applied write answered 503, then 412 on retry: %v; want an error of unknown outcome", err)
		}
		if got := faultproxy.MustRead(t, d); got.WriteID != "w1" {
			t.Fatalf("read %+v, want w1 (applied)", got)
		}
	})

	t.Run("PermanentErrorNotRetried", func(t *testing.T) {
		d := newDecider(t, c, freshObject(t))
		before := em.inject.uploadCount()
		em.inject.queue(fault{status: http.StatusForbidden})
		_, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w0", entry.LeaderToken{}))
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "403") {
			t.Fatalf("403: %v; want a refusal saying 403", err)
		}
		if n := em.inject.uploadCount() - before; n != 1 {
			t.Errorf("%d upload attempts after a 403, want 1", n)
		}
	})

	t.Run("CancelledDuringBackoff", func(t *testing.T) {
		d := newDecider(t, c, freshObject(t))
		em.inject.queue(fault{status: http.StatusServiceUnavailable}, fault{status: http.StatusServiceUnavailable},
			fault{status: http.StatusServiceUnavailable}, fault{status: http.StatusServiceUnavailable},
			fault{status: http.StatusServiceUnavailable}, fault{status: http.StatusServiceUnavailable})
		ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
		defer cancel()
		_, err := d.WriteEntry(ctx, faultproxy.Record(0, "w0", entry.LeaderToken{}))
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("503s until the deadline: %v; want an error wrapping context.DeadlineExceeded", err)
		}
		em.inject.clear() // leave no faults for later subtests
	})
}
