package leaderelection

import (
	"context"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
)

// lead runs one tenure that began with rec (a record of ours the store holds)
// and returns the record to campaign on once it ends, or ctx's error once ctx
// has ended (after releasing).
func (cd *candidate) lead(ctx context.Context, rec *entry.RaceEntry) (*entry.RaceEntry, error) {
	cd.observe(ctx, rec)
	// The store holds rec: every other write of ours was conditioned on an
	// older record and can no longer apply.
	cd.pending = nil
	tv := newTimeView(cd.Clock, rec.TermExpiry, rec.Term)
	if !tv.ValueInFuture() {
		// Won a term that was over before we learnt of it.
		return cd.read(ctx)
	}
	cd.log.Info("elected", "term", rec.Term, "expiry", rec.TermExpiry)

	electedCtx, cancelElected := context.WithCancel(ctx)
	defer cancelElected()
	// The watchdog ends the elected context when the TimeView expires,
	// whatever the extension loop is doing: even a store call that ignores
	// its deadline cannot keep a leader acting past its term.
	var watchdog clocks.StopTimer
	arm := func() {
		watchdog = cd.Clock.AfterFunc(cd.Clock.Until(tv.Get()), func() {
			if !tv.ValueInFuture() {
				cancelElected()
			}
		})
	}
	arm()
	defer func() { watchdog.Stop() }()

	electedDone := make(chan struct{})
	go func() {
		defer close(electedDone)
		// OnElected returning early ends the tenure like a shutdown.
		defer cancelElected()
		cd.OnElected(electedCtx, tv)
	}()

	cur := rec
	var after *entry.RaceEntry // the record another writer stored, if one did
	for {
		if !cd.Clock.SleepUntil(electedCtx, cd.extendAt(tv.Get())) {
			break
		}
		stored, ok := cd.extend(electedCtx, cur, tv)
		if !ok {
			after = stored
			break
		}
		cur = stored
		tv.set(maxTime(tv.Get(), cur.TermExpiry), cur.Term)
		watchdog.Stop()
		arm()
		cd.log.Debug("extended", "term", cur.Term, "expiry", cur.TermExpiry)
	}

	stillHeld := tv.ValueInFuture()
	if after != nil {
		// Another writer holds the record: stop believing at once.
		tv.set(cd.Clock.Now(), cur.Term)
	}
	cancelElected()
	<-electedDone
	// Only now that OnElected has returned is the term over for us; a
	// release written after this point cannot overlap our last action.
	tv.set(minTime(tv.Get(), cd.Clock.Now()), cur.Term)

	shutdown := ctx.Err() != nil
	switch {
	case after != nil:
		cd.log.Info("lost leadership: another candidate holds the record", "term", cur.Term, "holder", after.LeaderID)
	case !stillHeld:
		cd.log.Warn("leadership expired: could not extend the term in time", "term", cur.Term)
	default:
		// Shutdown, or OnElected returned while the term was held.
		after = cd.release(ctx, cur)
	}
	if cd.OnOusting != nil {
		cd.OnOusting(ctx)
	}
	if shutdown {
		return nil, ctx.Err()
	}
	if after != nil {
		return after, nil
	}
	return cd.read(ctx)
}

// extendAt is when to extend a term ending at expiry: half a term before it,
// so that the leader writes twice per term and a failed extension has half a
// term (more than MaxClockSkew, as Validate ensures) to be retried.
func (cd *candidate) extendAt(expiry time.Time) time.Time {
	return expiry.Add(-cd.TermLength / 2)
}

// extend extends the tenure held as cur, retrying failures until tv expires
// (the watchdog cancels ctx then). It returns the stored record and whether it
// is ours: false with a record means another writer holds it; false with nil
// means the term ran out or ctx ended.
func (cd *candidate) extend(ctx context.Context, cur *entry.RaceEntry, tv *TimeView) (*entry.RaceEntry, bool) {
	b := newBackoff(cd.rng, cd.TermLength/64, cd.TermLength/8)
	for {
		t0 := cd.Clock.Now()
		next := cd.successor(cur, t0.Add(cd.TermLength))
		// The deadline is the term held, not the one asked for: past it
		// this candidate must not believe it leads, whatever the store
		// says later.
		stored, mine, err := cd.write(ctx, next, tv.Get())
		switch {
		case err != nil:
			return nil, false
		case mine:
			return stored, true
		case !stored.Token.SameVersion(cur.Token):
			return stored, false
		}
		// Not applied, and the record is still ours to extend.
		if !cd.Clock.SleepFor(ctx, b.next()) {
			return nil, false
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
		case err != nil:
			cd.log.Warn("could not release; the term will expire instead", "term", cur.Term, "err", err)
			return nil
		case mine && stored.Released:
			cd.log.Info("released", "term", cur.Term)
			return stored
		case mine:
			// An extension whose outcome was unknown had been applied:
			// release that record instead.
			cur = stored
			continue
		case !stored.Token.SameVersion(cur.Token):
			return stored
		}
		if !cd.Clock.SleepFor(rctx, b.next()) {
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
		Token:            cur.Token,
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
