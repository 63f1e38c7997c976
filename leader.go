package leaderelection

import (
	"context"
	"sync"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
)

// lead runs one tenure that began with rec (a record of ours the store holds,
// written by the write sent at cd.sentAt) and returns the record to campaign
// on once it ends, or ctx's error once ctx has ended (after releasing), or a
// refusal. early reports that OnElected returned while the term was held.
func (cd *candidate) lead(ctx context.Context, rec *entry.RaceEntry) (next *entry.RaceEntry, early bool, err error) {
	cd.observe(ctx, rec)
	// The store holds rec: every other write of ours was conditioned on an
	// older record and can no longer apply.
	cd.pending = nil
	tv := newTimeView(cd.Clock, rec.TermExpiry, cd.sentAt.Add(cd.TermLength), rec.Term)
	if !tv.ValueInFuture() {
		// Won a term that was over before we learnt of it.
		next, err = cd.read(ctx)
		return next, false, err
	}
	cd.log.Info("elected", "term", rec.Term, "expiry", rec.TermExpiry)
	cd.obs.send(Event{Kind: EventElected, LeaderID: cd.LeaderID, Term: rec.Term, Expiry: rec.TermExpiry})

	electedCtx, cancelElected := context.WithCancel(ctx)
	defer cancelElected()
	// The watchdog ends the elected context when the TimeView expires,
	// whatever the extension loop is doing: even a store call that ignores
	// its deadline cannot keep a leader acting past its term. It fires when
	// the first of the two clocks says so; if the other still disagrees by
	// then (the wall clock stepped back), it waits again for the rest.
	// Timers run on the monotonic clock, which a wall clock stepped forward
	// does not move: it looks again at least every TermLength/16, so that
	// the context ends at most that late after such a step (the TimeView
	// itself is never late).
	var (
		mu       sync.Mutex
		watchdog clocks.StopTimer
	)
	var arm func()
	arm = func() {
		// The clock is read before the lock is taken: a clock read may
		// block (a stalled host), and must not hold up the other arm.
		d := min(max(tv.Remaining(), 0), cd.TermLength/16)
		mu.Lock()
		defer mu.Unlock()
		if watchdog != nil {
			watchdog.Stop()
		}
		watchdog = cd.Clock.AfterFunc(d, func() {
			if tv.ValueInFuture() {
				arm()
				return
			}
			cancelElected()
		})
	}
	arm()
	defer func() {
		mu.Lock()
		watchdog.Stop()
		mu.Unlock()
	}()

	electedDone := make(chan struct{})
	// returned: OnElected returned while the term was held (not on
	// seeing it over, nor for the elected context's end).
	returned := false
	go func() {
		defer close(electedDone)
		cd.OnElected(electedCtx, tv)
		returned = electedCtx.Err() == nil && tv.ValueInFuture()
		// OnElected returning early ends the tenure like a shutdown.
		cancelElected()
	}()

	cur := rec
	var after *entry.RaceEntry // the record another writer stored, if one did
	skewed := false            // stepping down for EnforceMaxClockSkew
	for {
		if cd.EnforceMaxClockSkew && cd.obs.tooFar(cd.Clock.Now()) {
			// Step down a nanosecond later, as the extension below
			// waits: the write that won the term usually brings the
			// sample that shows the clock too far, so an OnElected that
			// returns at once does so at this very instant. It is seen
			// first (a release, then a pause before campaigning again),
			// so that the tenure's end does not hang on which of the two
			// goroutines ran first.
			if skewed = cd.Clock.SleepFor(electedCtx, time.Nanosecond); skewed {
				cd.log.Error("this host's clock is too far from the store's: stepping down", "term", cur.Term, "offset", cd.obs.offset.String(), "max_clock_skew", cd.MaxClockSkew)
			}
			break
		}
		// Never at the very instant of the last step (a slow store puts
		// extendAt in the past): a goroutine woken at this instant, such
		// as an OnElected that returns at once, is seen first, so that
		// the course does not hang on which of the two ran first.
		if !cd.Clock.SleepUntil(electedCtx, maxTime(cd.extendAt(tv.Get()), cd.Clock.Now().Add(time.Nanosecond))) {
			break
		}
		stored, ok, xerr := cd.extend(electedCtx, cur, tv)
		if !ok {
			after, err = stored, xerr
			break
		}
		cur = stored
		// The stored expiry, not the later of old and new: a wall clock
		// stepped back since the last write must not stretch the term.
		// An answer that comes after the term ran out (this process was
		// paused) does not revive it: a Guard may have stopped waiting
		// for its calls, and the term is left to expire.
		if !tv.extend(cur.TermExpiry, cd.sentAt.Add(cd.TermLength)) {
			break
		}
		arm()
		cd.log.Debug("extended", "term", cur.Term, "expiry", cur.TermExpiry)
		cd.obs.send(Event{Kind: EventExtended, LeaderID: cd.LeaderID, Term: cur.Term, Expiry: cur.TermExpiry})
	}

	if after != nil {
		// Another writer holds the record: stop believing at once.
		tv.end()
	}
	cancelElected()
	<-electedDone
	// Only now that OnElected has returned (with whatever acts on its
	// behalf: a Guard waits for the calls it admitted) is the term over for
	// us. A release written after this point cannot overlap our last
	// action, but only if the term has not run out meanwhile: then a
	// successor may already lead, and the term is left to expire.
	stillHeld := tv.ValueInFuture()
	tv.end()

	shutdown, release := ctx.Err() != nil, false
	// A tenure whose OnElected returned while the term was held ended
	// early, whatever ended it next (a Guard draining its calls past the
	// term, an extension that hung, a successor), and is paused after.
	// The OnElected a Guard wraps says so through the TimeView.
	early = !shutdown && (returned || tv.returnedEarly.Load())
	ousted := Event{Kind: EventOusted, LeaderID: cd.LeaderID, Term: cur.Term, Expiry: cur.TermExpiry}
	switch {
	case err != nil:
		cd.log.Error("the store refused an extension: stepping down", "term", cur.Term, "err", err)
		ousted.Reason, ousted.Err = OustRefused, err
	case after != nil:
		cd.log.Info("lost leadership: another candidate holds the record", "term", cur.Term, "holder", after.LeaderID)
		ousted.Reason = OustSuperseded
	case !stillHeld:
		if early {
			cd.log.Warn("OnElected returned, then its term ran out before it could be released", "term", cur.Term)
		} else {
			cd.log.Warn("leadership expired: the term ran out before it was extended or released", "term", cur.Term)
		}
		ousted.Reason = OustExpired
		// An extension whose outcome is unknown may yet have applied: its
		// record is left to expire, like the term, never adopted or
		// released (a Guard may have stopped waiting for its calls).
		cd.pending = nil
	default:
		// Shutdown, or OnElected returned while the term was held.
		release = true
		ousted.Reason = OustReleased
		switch {
		case shutdown:
			ousted.Reason = OustShutdown
		case skewed && !returned:
			ousted.Reason, ousted.Err = OustClockSkew, errClockSkew
		}
	}
	// Sent before the release is written: OnElected has returned, and the
	// release may take until the term's end.
	cd.obs.send(ousted)
	if release {
		after = cd.release(ctx, cur)
	}
	if cd.OnOusting != nil {
		cd.OnOusting(ctx)
	}
	switch {
	case err != nil:
		return nil, false, err
	case shutdown:
		return nil, false, ctx.Err()
	case after != nil:
		return after, early, nil
	case early:
		return nil, true, nil // leadAndPause reads after its pause
	}
	next, err = cd.read(ctx)
	return next, early, err
}

// extendAt is when to extend a term ending at expiry: half a term before it,
// so that the leader writes twice per term and a failed extension has half a
// term (more than MaxClockSkew, as Validate ensures) to be retried; earlier
// when recent writes were slow, so that an extension and a retry as slow as
// the slowest of them, with the first backoff between them (at most
// TermLength/64), still land before the expiry. Never more than three
// quarters of a term before it: one write slower than that (a pause, a stall)
// cannot be planned for, and would otherwise make the next extensions due at
// once, one after another, until it left the window of recent writes.
func (cd *candidate) extendAt(expiry time.Time) time.Time {
	return expiry.Add(-min(max(cd.TermLength/2, 2*cd.writes.slowest()+cd.TermLength/32), 3*cd.TermLength/4))
}

// extend extends the tenure held as cur, retrying failures with backoff until
// tv expires (the watchdog cancels ctx then). It returns the stored record and
// whether it is ours: false with a record means another writer holds it; false
// with nil means the term ran out or ctx ended, or, with err, that the store
// refused.
func (cd *candidate) extend(ctx context.Context, cur *entry.RaceEntry, tv *TimeView) (*entry.RaceEntry, bool, error) {
	b := newBackoff(cd.rng, cd.TermLength/64, cd.TermLength/8)
	for {
		t0 := cd.Clock.Now()
		next := cd.successor(cur, t0.Add(cd.TermLength))
		// The deadline is the term held, not the one asked for: past it
		// this candidate must not believe it leads, whatever the store
		// says later.
		stored, mine, err := cd.write(ctx, next, tv.Get())
		switch {
		case isRefused(err):
			return nil, false, err
		case isThrottled(err):
			// Not applied: back off and try again.
		case err != nil:
			return nil, false, nil
		case mine:
			return stored, true, nil
		case !stored.Token.SameVersion(cur.Token):
			return stored, false, nil
		}
		// Not applied, and the record is still ours to extend.
		if !cd.Clock.SleepFor(ctx, max(b.Next(), cd.spacing)) {
			return nil, false, nil
		}
	}
}

// release writes a Released record over cur so that a waiting candidate takes
// over at once. It is called after OnElected has returned and the TimeView
// has been set into the past. It returns the record the store holds after.
func (cd *candidate) release(ctx context.Context, cur *entry.RaceEntry) *entry.RaceEntry {
	if cd.DisableRelease {
		return nil
	}
	// ctx may have ended (that is usually why we release); the release is
	// pointless once another candidate may take over anyway.
	rctx := context.WithoutCancel(ctx)
	deadline := cur.TermExpiry.Add(cd.MaxClockSkew)
	b := newBackoff(cd.rng, cd.TermLength/64, cd.TermLength/8)
	for {
		next := cd.successor(cur, cd.Clock.Now())
		next.Released = true
		stored, mine, err := cd.write(rctx, next, deadline)
		switch {
		case isThrottled(err):
			// Not applied: back off and try again.
		case err != nil:
			cd.log.Warn("could not release; the term will expire instead", "term", cur.Term, "err", err)
			return nil
		case !mine && stored.Token.SameVersion(cur.Token):
			// Not applied, and the record is still ours to release.
		case mine && stored.Released:
			cd.log.Info("released", "term", cur.Term)
			return stored
		case mine:
			// An extension whose outcome was unknown had been applied:
			// release that record instead.
			cur = stored
			continue
		default:
			return stored
		}
		if !cd.Clock.SleepFor(rctx, max(b.Next(), cd.spacing)) {
			return nil
		}
	}
}

// successor returns the record that follows cur in the same tenure.
func (cd *candidate) successor(cur *entry.RaceEntry, expiry time.Time) *entry.RaceEntry {
	return &entry.RaceEntry{
		ElectionNumber:   cur.ElectionNumber + 1,
		Term:             cur.Term,
		LeaderID:         cd.LeaderID,
		HostPort:         cd.HostPort,
		ConnectionParams: cd.ConnectionParams,
		TermExpiry:       expiry,
		Lineage:          cur.Lineage,
		Token:            cur.Token,
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
