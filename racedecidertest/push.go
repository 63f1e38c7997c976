package racedecidertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

// The push checks run in real time, as the stores behind them are real
// servers. What they assert does not depend on how fast the machine is:
// each window below is far longer than a sound backend needs, and only a
// broken one uses it up.
const (
	// blockedFor is how long a waiter on the current token must have
	// been waiting before the check writes. Its goroutine has called
	// WaitForChange by then (the check waits for the call), and the
	// backend has had time to set up its watch: the write must wake a
	// waiter, not meet a late caller who would find the change at once
	// and prove nothing about waking.
	blockedFor = 50 * time.Millisecond
	// wakeDeadline is the deadline of a waiter that a write must wake. A
	// backend that never wakes its waiters returns only at the deadline,
	// even with the new record (memory re-checks when its context ends),
	// so the check fails a waiter whose context had ended when it returned.
	wakeDeadline = 5 * time.Second
	// vouchWindow is the deadline of a waiter on a record that does not
	// change, which must block until then to vouch that nothing changed.
	vouchWindow = 50 * time.Millisecond
	// vouchSlop is how much sooner than its deadline a waiter may say that
	// nothing changed: a backend may end the wait on a timer of its own
	// set from the deadline, which can fire a little early. Answering at
	// once is far outside it.
	vouchSlop = 10 * time.Millisecond
	// channelPatience is how long a push channel may keep saying that it
	// cannot tell (its watch is not up yet) before the check gives up.
	channelPatience = 10 * time.Second
)

func changeNotifier(t *testing.T, d leaderelection.RaceDecider) {
	cn := d.(leaderelection.ChangeNotifier)
	// Nothing changed: it must vouch for that by blocking until its
	// context ends.
	vouches(t, cn, entry.LeaderToken{}, "an unchanged empty store")
	// The first record wakes a waiter on the empty store.
	tok, _ := wakes(t, d, cn, entry.LeaderToken{}, sampleEntry(0, "w-0"), "the first record")
	first := tok
	// Already changed: returns at once with the current record.
	got, err := cn.WaitForChange(t.Context(), entry.LeaderToken{})
	if err != nil || got.WriteID != "w-0" || !got.Token.SameVersion(tok) {
		t.Fatalf("WaitForChange after a write = %+v, %v; want the new record, with its token %+v, at once", got, err, tok)
	}
	vouches(t, cn, tok, "the current token after the first record")

	// Across a new leader's write, an extension (the same leader, a new
	// election number) and a release: each wakes a waiter already
	// blocked on the record it replaces.
	var last *entry.RaceEntry
	for i, change := range []string{"a new leader", "an extension", "a release"} {
		e := sampleEntry(int64(i+1), fmt.Sprintf("w-%d", i+1))
		switch change {
		case "an extension":
			e.LeaderID, e.Term = last.LeaderID, last.Term
		case "a release":
			e.LeaderID, e.Term, e.Released = last.LeaderID, last.Term, true
		}
		next, woken := wakes(t, d, cn, tok, e, change)
		// Already replaced, asked with a live context: the record that
		// replaced it, at once, never a wait for the next change.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		got, err := cn.WaitForChange(ctx, tok)
		cancel()
		if err != nil || got.WriteID != e.WriteID || !got.Token.SameVersion(next) {
			t.Fatalf("WaitForChange on a token replaced by %s = %+v, %v; want the record that replaced it at once", change, got, err)
		}
		// Nothing changed since: it must block again, not hand back the
		// current record.
		vouches(t, cn, next, "the current token after "+change)
		tok, last = next, woken
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := cn.WaitForChange(ctx, tok); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitForChange with a cancelled context: err = %v, want context.Canceled", err)
	}
	// A context that ended before the call vouches for nothing by itself:
	// with a token already replaced, ctx's error would say that nothing
	// changed, and the caller would not read.
	got, err = cn.WaitForChange(ctx, first)
	if errors.Is(err, context.Canceled) || (err == nil && (got == nil || got.WriteID != last.WriteID)) {
		t.Errorf("WaitForChange with a cancelled context and a replaced token = %+v, %v; want the record that replaced it, or an error that does not wrap context.Canceled", got, err)
	}
}

// waitResult is what a WaitForChange in the background returned.
type waitResult struct {
	e   *entry.RaceEntry
	err error
	// late is set when the waiter's context had ended by the time it
	// returned: whatever it returned, it did not return for a change.
	late bool
}

// startWait calls WaitForChange on tok in the background, with a context
// ending wakeDeadline from now, and returns once the call is being made.
func startWait(t *testing.T, cn leaderelection.ChangeNotifier, tok entry.LeaderToken) <-chan waitResult {
	done := make(chan waitResult, 1)
	calling := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), wakeDeadline)
		defer cancel()
		close(calling)
		e, err := cn.WaitForChange(ctx, tok)
		done <- waitResult{e, err, ctx.Err() != nil}
	}()
	<-calling
	return done
}

// wakes checks that writing e conditioned on tok, the current record's
// token, wakes a waiter that was already blocked on tok: the waiter must
// still be waiting blockedFor after its call, and return the record written
// long before its deadline. A channel that says it cannot tell yet is
// asked again, for up to channelPatience. wakes returns the new token and
// the record the waiter returned.
func wakes(t *testing.T, d leaderelection.RaceDecider, cn leaderelection.ChangeNotifier, tok entry.LeaderToken, e *entry.RaceEntry, change string) (entry.LeaderToken, *entry.RaceEntry) {
	t.Helper()
	var done <-chan waitResult
	for patience := time.Now().Add(channelPatience); done == nil; {
		waiting := startWait(t, cn, tok)
		window := time.NewTimer(blockedFor)
		select {
		case <-window.C:
			done = waiting
		case r := <-waiting:
			switch {
			case r.err == nil:
				t.Fatalf("WaitForChange on the current token, before %s, returned %+v with nothing changed; want it to block", change, r.e)
			case errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, context.Canceled):
				t.Fatalf("WaitForChange on the current token, before %s, vouched that nothing changed (%v) long before its deadline", change, r.err)
			case time.Now().After(patience):
				t.Fatalf("WaitForChange on the current token, before %s, still could not tell whether it changed after %v: %v", change, channelPatience, r.err)
			}
			// It cannot tell yet (an error not wrapping its
			// context's): the window's end paces the next try.
			<-window.C
		}
	}
	next := write(t, d, e, tok)
	var r waitResult
	select {
	case r = <-done:
	case <-time.After(wakeDeadline + 10*time.Second):
		t.Fatalf("WaitForChange across %s did not return, even long after its context's deadline", change)
	}
	switch {
	case r.late:
		t.Fatalf("WaitForChange across %s returned only once its context had ended (%+v, %v): a write must wake a blocked waiter", change, r.e, r.err)
	case r.err != nil || r.e == nil || r.e.WriteID != e.WriteID || !r.e.Token.SameVersion(next):
		t.Fatalf("WaitForChange across %s = %+v, %v; want the new record with its token %+v", change, r.e, r.err, next)
	}
	return next, r.e
}

// vouches checks that WaitForChange on tok, the current record's token,
// blocks until its context ends, vouching that nothing changed, and says so
// no sooner than its deadline (less vouchSlop). A channel that is not up yet
// may say it cannot tell (an error that does not wrap the context's); it
// must vouch within channelPatience.
func vouches(t *testing.T, cn leaderelection.ChangeNotifier, tok entry.LeaderToken, what string) {
	t.Helper()
	var err error
	for patience := time.Now().Add(channelPatience); time.Now().Before(patience); {
		ctx, cancel := context.WithTimeout(t.Context(), vouchWindow)
		deadline, _ := ctx.Deadline()
		var got *entry.RaceEntry
		got, err = cn.WaitForChange(ctx, tok)
		early := time.Until(deadline)
		<-ctx.Done() // a channel that cannot tell may answer at once
		cancel()
		switch {
		case err == nil:
			t.Fatalf("WaitForChange on %s = %+v; want it to block until its context ends", what, got)
		case errors.Is(err, context.DeadlineExceeded) && early > vouchSlop:
			t.Fatalf("WaitForChange on %s vouched that nothing changed (%v) %v before its deadline; it may say so only once its context has ended", what, err, early)
		case errors.Is(err, context.DeadlineExceeded):
			return
		case errors.Is(err, context.Canceled):
			t.Fatalf("WaitForChange on %s: %v; want context.DeadlineExceeded, its context's error", what, err)
		}
	}
	t.Fatalf("WaitForChange on %s never vouched that nothing changed in %v: %v", what, channelPatience, err)
}
