package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// TestElection runs a full election through Config.Acquire: three
// candidates, each with its own client through its own fault proxy, so that
// one candidate's access can be cut while the others keep theirs.
func TestElection(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	racedecidertest.RunElection(t, func(t *testing.T, candidate int) racedecidertest.Access {
		p := faultproxy.Start(t, serverAddr(t, cfg))
		return racedecidertest.Access{Decider: newDecider(t, viaAddr(t, cfg, p.Addr()), name), Cut: p.SetCut}
	}, racedecidertest.Timing{TermLength: 2 * time.Second, MaxClockSkew: 200 * time.Millisecond})
}

// TestWatchBrokenThenRecovers cuts the connection the watch runs on:
// WaitForChange must then fail promptly (so that the engine polls) instead
// of blocking on a dead watch, and work again once the server is reachable.
func TestWatchBrokenThenRecovers(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	p := faultproxy.Start(t, serverAddr(t, cfg))
	d := newDecider(t, viaAddr(t, cfg, p.Addr()), name)
	direct := newDecider(t, cfg, name)
	tok, err := direct.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w0", TermExpiry: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}

	// wait calls WaitForChange on tok for at most d.
	wait := func(limit time.Duration) (*entry.RaceEntry, error) {
		ctx, cancel := context.WithTimeout(t.Context(), limit)
		defer cancel()
		return d.WaitForChange(ctx, tok)
	}
	if e, err := wait(300 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForChange on an unchanged Lease = %+v, %v; want it to block", e, err)
	}

	p.SetCut(true)
	start := time.Now()
	for {
		_, err := wait(time.Second)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("with the watch cut, WaitForChange fails after %v: %v", time.Since(start).Round(time.Millisecond), err)
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("WaitForChange still blocks (or succeeds) %v after the watch's connection was cut: %v", time.Since(start), err)
		}
	}

	p.SetCut(false)
	start = time.Now()
	for {
		_, err := wait(300 * time.Millisecond)
		if errors.Is(err, context.DeadlineExceeded) {
			break // the watch is back: blocking again
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the watch did not come back within %v of restoring the connection: %v", time.Since(start), err)
		}
	}
	t.Logf("watch re-established %v after the connection was restored", time.Since(start).Round(time.Millisecond))

	done := waitAsync(t, d, tok, "WaitForChange after recovery")
	if _, err := direct.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "b", WriteID: "w1", TermExpiry: time.Now().Add(time.Minute), Token: tok}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-done:
		if e == nil || e.WriteID != "w1" {
			t.Fatalf("WaitForChange after recovery returned %+v, want w1", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitForChange did not see a write 10s after the watch recovered")
	}
}

// TestWaitForChangeSeesDeletion: a deleted Lease is a change, to "no
// record".
func TestWaitForChangeSeesDeletion(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	d := newDecider(t, cfg, name)
	tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w0", TermExpiry: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WaitForChange(t.Context(), entry.LeaderToken{}); err != nil {
		t.Fatal(err) // starts the watch; the record exists, so at once
	}
	done := waitAsync(t, d, tok, "WaitForChange across a deletion")
	if err := clientset(t, cfg).CoordinationV1().Leases(namespace).Delete(t.Context(), name, deleteOptions()); err != nil {
		t.Fatal(err)
	}
	if e := <-done; e == nil || e.ElectionNumber != entry.NoElections || !e.Token.IsZero() {
		t.Fatalf("WaitForChange across a deletion returned %+v, want no record", e)
	}
}

// TestWriteOverPushedLease has a candidate woken by a pushed release write
// over the Lease the watch delivered: a GET there would add a round trip to
// every hand-over.
func TestWriteOverPushedLease(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	sent := &requests{}
	candidate := newDecider(t, sent.counting(cfg), name)
	leader := newDecider(t, cfg, name)
	tok, err := leader.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, Term: 1, LeaderID: "a", WriteID: "w0", TermExpiry: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	// The first wait starts the watch; the token it waits on is its own.
	if _, err := candidate.WaitForChange(t.Context(), entry.LeaderToken{}); err != nil {
		t.Fatal(err)
	}
	done := waitAsync(t, candidate, tok, "WaitForChange")
	rel, err := leader.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 2, Term: 1, LeaderID: "a", WriteID: "w1", Released: true, TermExpiry: time.Now(), Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	pushed := <-done
	if pushed == nil || !pushed.Released || !pushed.Token.SameVersion(rel) {
		t.Fatalf("WaitForChange across the release = %+v; want the release at %s", pushed, rel.Version)
	}
	gets := sent.count(kindGet)
	if _, err := candidate.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 3, Term: 3, LeaderID: "b", WriteID: "w2", TermExpiry: time.Now().Add(time.Minute), Token: pushed.Token}); err != nil {
		t.Fatalf("writing over the pushed release: %v", err)
	}
	if n := sent.count(kindGet) - gets; n != 0 {
		t.Errorf("writing over the Lease the watch delivered sent %d GETs; want none (%v)", n, sent)
	}
}
