package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// http1 returns a copy of cfg whose client speaks HTTP/1.1 only.
//
// client-go otherwise negotiates HTTP/2, which carries every request of a
// client, the watch included, as interleaved frames on one connection. The
// fault proxy recognises a request by the client speaking after the server
// did, and can only act on a whole connection: over HTTP/2 it could neither
// tell one request from the next nor lose one answer without losing every
// other in flight. Over HTTP/1.1 a connection carries one request at a time
// (a watch holds one of its own), as the proxy assumes.
func http1(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.TLSClientConfig.NextProtos = []string{"http/1.1"}
	return c
}

// faulty is a Decider whose every request goes through a fault proxy, over
// HTTP/1.1, and one reaching the API server directly, on one fresh Lease.
type faulty struct {
	faultproxy.Faulty
	sent *requests
}

func newFaulty(t *testing.T) *faulty {
	t.Helper()
	cfg := adminConfig(t)
	name := freshLease()
	p := faultproxy.Start(t, serverAddr(t, cfg))
	sent := &requests{}
	d := newDecider(t, sent.counting(http1(viaAddr(t, cfg, p.Addr()))), name)
	t.Cleanup(func() {
		if !sent.onlyProto("HTTP/1.1") {
			t.Errorf("answers came over %s; want HTTP/1.1 only", sent.protoList())
		}
	})
	return &faulty{Faulty: faultproxy.Faulty{Proxy: p, D: d, Direct: newDecider(t, cfg, name)}, sent: sent}
}

// notApplied are the error classes a write whose outcome the client cannot
// know must not have: client-go does not retry writes, so any answer lost
// leaves the outcome unknown.
var notApplied = []error{entry.ErrRaceLost, entry.ErrRefused, entry.ErrThrottled}

// mustBeUnknown fails t unless err is a failed write of unknown outcome.
func mustBeUnknown(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded", what)
	}
	for _, c := range notApplied {
		if errors.Is(err, c) {
			t.Fatalf("%s: %v; it must not be %v", what, err, c)
		}
	}
	if !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("%s: error %q does not say the outcome is unknown", what, err)
	}
	t.Logf("%s: %v", what, err)
}

// TestFaults runs the Decider through a TCP proxy that delays, drops
// answers, resets and cuts connections. Each fault is armed while the
// client's connection is open and idle (after a request on it), so that it
// acts on the request that follows, not on a TLS handshake.
func TestFaults(t *testing.T) {
	t.Run("latency", func(t *testing.T) {
		faultproxy.RaceUnderLatency(t, &newFaulty(t).Faulty)
	})

	t.Run("dropped answer of an applied update", func(t *testing.T) {
		// The Decider created the Lease, so the update is one PUT.
		f := newFaulty(t)
		faultproxy.DroppedAppliedWrite(t, &f.Faulty, notApplied...)
	})

	t.Run("dropped answer of an applied create", func(t *testing.T) {
		f := newFaulty(t)
		if e := faultproxy.MustRead(t, f.D); e.ElectionNumber != entry.NoElections {
			t.Fatalf("fresh Lease read as %+v", e)
		}
		f.Proxy.DropResponses(1)
		_, err := f.D.WriteEntry(t.Context(), faultproxy.Record(0, "w-ambiguous", entry.LeaderToken{}))
		mustBeUnknown(t, err, "create whose answer was dropped (it was applied)")
		if st := f.Proxy.Stats(); st.DroppedResponses != 1 {
			t.Errorf("proxy stats %+v, want 1 dropped response", st)
		}
		for _, d := range []leaderelection.RaceDecider{f.Direct, f.D} {
			if got := faultproxy.MustRead(t, d); got.WriteID != "w-ambiguous" {
				t.Fatalf("read back %+v; want the ambiguous create, which was applied", got)
			}
		}
	})

	t.Run("dropped answer of an applied replace", func(t *testing.T) {
		// Another writer's record, which the Decider has read: one PUT.
		f := newFaulty(t)
		tok := faultproxy.MustWrite(t, f.Direct, faultproxy.Record(0, "w-seed", entry.LeaderToken{}))
		faultproxy.MustRead(t, f.D)
		f.Proxy.DropResponses(1)
		_, err := f.D.WriteEntry(t.Context(), faultproxy.Record(1, "w-ambiguous", tok))
		mustBeUnknown(t, err, "replace whose answer was dropped (it was applied)")
		for _, d := range []leaderelection.RaceDecider{f.Direct, f.D} {
			if got := faultproxy.MustRead(t, d); got.WriteID != "w-ambiguous" || got.ElectionNumber != 1 {
				t.Fatalf("read back %+v; want the ambiguous replace, which was applied", got)
			}
		}
	})

	t.Run("dropped answer of a losing write", func(t *testing.T) {
		f := newFaulty(t)
		faultproxy.DroppedLosingWrite(t, &f.Faulty, notApplied...)
	})

	t.Run("reset", func(t *testing.T) {
		// A write reset before it reaches the server: the client cannot
		// know it was not applied. A read reset on a new connection (the
		// reset one is gone) fails at once: the Decider makes single
		// attempts, and the engine retries.
		f := newFaulty(t)
		tok := faultproxy.MustWrite(t, f.D, faultproxy.Record(0, "w-0", entry.LeaderToken{}))
		f.Proxy.ResetNext(1)
		_, err := f.D.WriteEntry(t.Context(), faultproxy.Record(1, "w-reset", tok))
		mustBeUnknown(t, err, "write whose connection was reset")
		if got := faultproxy.MustRead(t, f.Direct); got.WriteID != "w-0" {
			t.Fatalf("read back %+v; the reset write never reached the server, want w-0", got)
		}
		f.Proxy.ResetNext(1)
		if got, err := f.D.ReadCurrent(t.Context()); err == nil {
			t.Fatalf("read through a reset connection = %+v; want an error", got)
		}
		if got := faultproxy.MustRead(t, f.D); got.WriteID != "w-0" {
			t.Fatalf("read after the reset: %+v, want w-0", got)
		}
		if st := f.Proxy.Stats(); st.Resets != 2 {
			t.Errorf("proxy stats %+v, want 2 resets", st)
		}
		faultproxy.MustWrite(t, f.D, faultproxy.Record(1, "w-1", tok))
	})

	t.Run("cut", func(t *testing.T) {
		// Cut off, calls fail (at once: new connections are reset), never
		// as a lost race; once access returns, the record is unchanged
		// and writable.
		f := newFaulty(t)
		tok := faultproxy.MustWrite(t, f.D, faultproxy.Record(0, "w-0", entry.LeaderToken{}))
		f.Proxy.SetCut(true)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := f.D.ReadCurrent(ctx); err == nil {
			t.Fatal("ReadCurrent while cut succeeded")
		}
		ctx, cancel = context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := f.D.WriteEntry(ctx, faultproxy.Record(1, "w-cut", tok))
		if err == nil || errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("WriteEntry while cut: %v; want an error, not a lost race", err)
		}
		f.Proxy.SetCut(false)
		if got := faultproxy.MustRead(t, f.D); got.WriteID != "w-0" {
			t.Fatalf("read %+v after the cut, want w-0", got)
		}
		faultproxy.MustWrite(t, f.D, faultproxy.Record(1, "w-1", tok))
	})

	t.Run("deadline", func(t *testing.T) {
		f := newFaulty(t)
		faultproxy.MustRead(t, f.D) // connect first: the deadline is for the request
		faultproxy.MissesDeadline(t, f.Proxy, f.D, 300*time.Millisecond)
	})
}

// TestElectionWithFaults runs three candidates, each through its own fault
// proxy over HTTP/1.1, while answers to applied writes are lost, connections
// reset and the leader is stopped or cut off: never two leaders, fencing
// tokens always rising (faultproxy.RunElectionUnderFaults). The request
// count shows that failures are retried with backoff, not in a loop.
func TestElectionWithFaults(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	sent := &requests{}
	start := time.Now()
	faultproxy.RunElectionUnderFaults(t, serverAddr(t, cfg), func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		return newDecider(t, sent.counting(http1(viaAddr(t, cfg, proxyAddr))), name)
	}, faultproxy.ElectionFaults{
		Timing:      racedecidertest.Timing{TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond},
		Disruptions: 4,
	})
	took := time.Since(start)
	rate := float64(sent.count(kindList)+sent.count(kindWatch)+sent.count(kindGet)+sent.count(kindWrite)) / took.Seconds()
	t.Logf("%v in %v: %.0f requests/s", sent, took.Round(time.Millisecond), rate)
	if !sent.onlyProto("HTTP/1.1") {
		t.Errorf("answers came over %s; want HTTP/1.1 only", sent.protoList())
	}
	// Three candidates and their watches, with a 1 s term: a leader
	// extends a few times a second, the others wait on their watches. A
	// retry loop without backoff would send hundreds a second.
	if rate > 60 {
		t.Errorf("%.0f requests/s over the run; want at most 60", rate)
	}
}

// TestWaitVouchesOnlyWhenWatching: a wait that ends before the watch has
// started does not wrap the deadline, which would vouch that nothing
// changed (see leaderelection.ChangeNotifier); once the watch knows the
// token current, a wait that ends with nothing new does.
func TestWaitVouchesOnlyWhenWatching(t *testing.T) {
	f := newFaulty(t)
	n := f.D.(leaderelection.ChangeNotifier)
	tok := faultproxy.MustWrite(t, f.Direct, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	f.Proxy.SetLatency(time.Second) // the watch's first LIST takes a second
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err := n.WaitForChange(ctx, tok)
	cancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange before the watch started = %v; want an error that does not wrap the deadline", err)
	}
	f.Proxy.SetLatency(0)
	// The watch comes up within about a second (its first LIST was sent
	// with the latency): from then on a wait vouches.
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err = n.WaitForChange(ctx, tok)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if i == 20 {
			t.Fatalf("WaitForChange on the current version, 6 s on = %v; want the deadline", err)
		}
	}
}

// TestTLSFailureIsRefused: an API server whose certificate this host does
// not trust (a kubeconfig without its certificate authority) never gets a
// request: not an unknown outcome retried for ever but a refusal naming the
// Lease and why, and Acquire ends.
func TestTLSFailureIsRefused(t *testing.T) {
	cfg := rest.CopyConfig(adminConfig(t))
	cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData = "", nil
	name := freshLease()
	racedecidertest.CheckRefuses(t, newDecider(t, cfg, name), "k8s://"+namespace+"/"+name, "presents a certificate this host does not accept")
}
