package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
)

// Acquire campaigns for leadership until ctx ends, then returns ctx's error.
//
// While this candidate leads, OnElected runs with a context that ends with the
// leadership. Losing leadership (a lost race, a term that ran out because the
// store could not be reached) cancels that context, waits for OnElected to
// return, calls OnOusting, and campaigns again. When ctx ends while leading,
// Acquire releases the term (unless DisableRelease) after OnElected has
// returned, so that another candidate takes over at once. If OnElected
// returns on its own, the candidate steps down the same way and campaigns
// again.
//
// Acquire returns early with an error for an invalid Config, and for a stored
// record that does not decode (wrapping ErrCorruptRecord): it never overwrites
// what it cannot read, as the object may belong to something else.
func (c Config) Acquire(ctx context.Context) error {
	if err := c.Validate(); err != nil {
		return err
	}
	cd := &candidate{Config: c.withDefaults(), lastTerm: -1, rng: newRNG(hooks.Rand(ctx))}
	cd.notifier, _ = c.Decider.(ChangeNotifier)
	cd.log = cd.Logger.With("leader_id", cd.LeaderID)
	err := cd.campaign(ctx)
	if ctx.Err() != nil {
		cd.releaseUnknownWrite(ctx)
		// An operation's own deadline may have passed at the same time:
		// the caller stopped us, and that is what we report.
		return ctx.Err()
	}
	return err
}

// releaseUnknownWrite handles a shutdown that interrupted an acquisition: the
// write may have been applied, leaving a term nobody serves. If a read shows
// it was, release it so that the next leader need not wait it out.
func (cd *candidate) releaseUnknownWrite(ctx context.Context) {
	if len(cd.pending) == 0 || cd.DisableRelease {
		return
	}
	rctx, cancel := cd.Clock.ContextWithTimeout(context.WithoutCancel(ctx), cd.opTimeout())
	defer cancel()
	rec, err := cd.Decider.ReadCurrent(rctx)
	if err == nil && rec != nil && cd.ours(rec) && !rec.Released {
		cd.release(ctx, rec)
	}
}

// candidate is the state of one Acquire call.
type candidate struct {
	Config
	notifier ChangeNotifier
	log      *slog.Logger
	rng      *rng
	// lastTerm is the tenure last reported to LeaderChanged.
	lastTerm int64
	// rtt tracks the store's round trip, which sizes herdJitter.
	rtt rttTracker
	// pending holds writes whose outcome was unknown and that may still be
	// applied: a record carrying one of these write ids is ours.
	pending []pendingWrite
}

type pendingWrite struct {
	writeID string
	// on is the token the write was conditioned on; once the store holds
	// another record the write can never apply.
	on entry.LeaderToken
}

// opTimeout bounds one read while campaigning, so a hung store call cannot
// stall a candidate forever.
func (cd *candidate) opTimeout() time.Duration { return cd.TermLength / 2 }

// herdJitter is the window over which candidates that find the record free
// at the same moment spread their writes. With k others drawing uniformly
// over a window W, the first writer's write reaches them one round trip
// (rtt) after it is sent, so about k x rtt / W of them write too, and the
// first write goes out after about W / (k+1). W = k x rtt x (1.5 +
// log2(k)/2) keeps both small: 2 others wait 4 rtt at most and collide in
// fewer than half of the hand-overs; 49 others, 210 rtt, and about one
// hand-over in four has a second writer. The window is bounded by a share
// of the term that grows with k (TermLength/16 for the default 3
// candidates), and never exceeds TermLength/2, so that it adds little to a
// takeover however slow the store.
func (cd *candidate) herdJitter() time.Duration {
	k := float64(cd.ExpectedCandidates - 1)
	if k <= 0 {
		return 0
	}
	w := time.Duration(float64(cd.rtt.estimate()) * k * (1.5 + math.Log2(k)/2))
	return min(w, time.Duration(k*float64(cd.TermLength)/32), cd.TermLength/2)
}

func (cd *candidate) campaign(ctx context.Context) error {
	rec, err := cd.read(ctx)
	if err != nil {
		return err
	}
	// jittered records whether this candidate has waited a random while
	// since the record became free, so that candidates who saw it free
	// together re-read at different moments and most see a winner instead
	// of writing.
	jittered := false
	for {
		cd.observe(ctx, rec)
		if !rec.Released && cd.ours(rec) {
			// A write whose outcome was unknown was applied after all.
			cd.log.Info("an earlier write with an unknown outcome was applied: leading", "term", rec.Term)
			if rec, err = cd.lead(ctx, rec); err != nil {
				return err
			}
			jittered = false
			continue
		}
		if !cd.free(rec) {
			if rec, err = cd.waitForFree(ctx, rec); err != nil {
				return err
			}
			jittered = true
			continue
		}
		if !jittered {
			if !cd.Clock.SleepFor(ctx, cd.rng.jitter(cd.herdJitter())) {
				return ctx.Err()
			}
			if rec, err = cd.read(ctx); err != nil {
				return err
			}
			jittered = true
			continue
		}
		jittered = false
		won, next, err := cd.tryAcquire(ctx, rec)
		if err != nil {
			return err
		}
		if won {
			if next, err = cd.lead(ctx, next); err != nil {
				return err
			}
		}
		rec = next
	}
}

// free reports whether rec may be taken over now: there is none, it was
// released, or its term is over even on a clock MaxClockSkew behind the
// holder's.
func (cd *candidate) free(rec *entry.RaceEntry) bool {
	return rec.ElectionNumber == entry.NoElections || rec.Released ||
		cd.Clock.Now().After(rec.TermExpiry.Add(cd.MaxClockSkew))
}

// waitForFree waits until rec's term can be taken over (plus jitter), or a
// change is pushed, or the poll interval passes, and returns the record then,
// reading it only when nothing vouches for it.
func (cd *candidate) waitForFree(ctx context.Context, rec *entry.RaceEntry) (*entry.RaceEntry, error) {
	// Just past the takeover time, as free() requires the clock to be after
	// it: waking exactly on it would find the record not yet free and wait
	// again for a moment already here.
	until := rec.TermExpiry.Add(cd.MaxClockSkew + time.Nanosecond + cd.rng.jitter(cd.herdJitter()))
	if cd.notifier == nil {
		// Jittered so that candidates started together do not poll, and
		// then write, in step.
		poll := cd.PollInterval - cd.rng.jitter(cd.PollInterval/4)
		until = minTime(until, cd.Clock.Now().Add(poll))
	}
	pushed, quiet, err := waitForChangeUntil(ctx, cd.Clock, cd.notifier, rec.Token, until)
	switch {
	case err != nil:
		return nil, err
	case quiet:
		// Nothing changed up to the takeover time: rec is current.
		return rec, nil
	case pushed != nil && !cd.free(pushed):
		// An extension or a new leader: nothing to do, nothing to read.
		return pushed, nil
	case pushed != nil:
		// A push wakes every waiter at once: spread them out, listening
		// for the first one's write, which makes the others stand down.
		again, quiet, err := waitForChangeUntil(ctx, cd.Clock, cd.notifier, pushed.Token,
			cd.Clock.Now().Add(cd.rng.jitter(cd.herdJitter())))
		switch {
		case err != nil:
			return nil, err
		case again != nil:
			return again, nil
		case quiet:
			return pushed, nil
		}
	}
	return cd.read(ctx)
}

// read reads the record, retrying failures with backoff until ctx ends. A
// corrupt record is returned as an error at once.
func (cd *candidate) read(ctx context.Context) (*entry.RaceEntry, error) {
	return readRetrying(ctx, cd.Clock, cd.rng, &cd.rtt, cd.Decider, cd.opTimeout(), time.Time{}, func(err error) error {
		if errors.Is(err, entry.ErrCorruptRecord) {
			return fmt.Errorf("leaderelection: not campaigning on a record it cannot read: %w", err)
		}
		cd.log.Warn("reading the election record failed; retrying", "err", err)
		return nil
	})
}

// errNoRecord reports a Decider that broke its contract by returning neither
// a record nor an error.
var errNoRecord = errors.New("leaderelection: the Decider's ReadCurrent returned no record and no error")

// readRetrying reads until it succeeds, ctx ends, or deadline (if not zero)
// passes. Each failure goes to onErr; a non-nil result from onErr stops the
// retries and is returned.
//
// Successful reads' round trips go to rtt, if not nil.
func readRetrying(ctx context.Context, clock clocks.Clock, r *rng, rtt *rttTracker, d RaceDecider, timeout time.Duration, deadline time.Time, onErr func(error) error) (*entry.RaceEntry, error) {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = clock.ContextWithDeadline(ctx, deadline)
		defer cancel()
	}
	b := newBackoff(r, timeout/64, timeout)
	for {
		rctx, cancel := clock.ContextWithTimeout(ctx, timeout)
		t0 := clock.Now()
		rec, err := d.ReadCurrent(rctx)
		cancel()
		if err == nil && rtt != nil {
			rtt.add(clock.Now().Sub(t0))
		}
		if err == nil && rec == nil {
			err = errNoRecord
		}
		if err == nil {
			return rec, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if stop := onErr(err); stop != nil {
			return nil, stop
		}
		if !clock.SleepFor(ctx, b.next()) {
			return nil, ctx.Err()
		}
	}
}

// observe reports a new tenure to LeaderChanged and forgets pending writes
// that can no longer apply.
func (cd *candidate) observe(ctx context.Context, rec *entry.RaceEntry) {
	kept := cd.pending[:0]
	for _, p := range cd.pending {
		if p.on.SameVersion(rec.Token) || p.writeID == rec.WriteID {
			kept = append(kept, p)
		}
	}
	cd.pending = kept
	if rec.ElectionNumber == entry.NoElections || rec.Released || rec.Term == cd.lastTerm {
		return
	}
	cd.lastTerm = rec.Term
	if cd.LeaderChanged != nil {
		cd.LeaderChanged(ctx, *rec.Clone())
	}
}

// ours reports whether rec was written by a write of ours whose outcome was
// unknown.
func (cd *candidate) ours(rec *entry.RaceEntry) bool {
	for _, p := range cd.pending {
		if p.writeID == rec.WriteID {
			return true
		}
	}
	return false
}

// write writes next (conditioned on next.Token, under a fresh WriteID) before
// deadline and returns the record the store holds afterwards. mine reports that the store holds a
// record written by this candidate: next, or an earlier write whose outcome
// was unknown and that was applied after all. A write that failed in any way
// is resolved by reading back write ids, as a transport error can hide a
// success and a request the client retried can report a lost race for a write
// that was applied. err is set only when ctx ended or the deadline passed with
// the outcome still unknown.
func (cd *candidate) write(ctx context.Context, next *entry.RaceEntry, deadline time.Time) (stored *entry.RaceEntry, mine bool, err error) {
	// A write sent now could only leave an outcome to resolve: its caller
	// has stopped, or the term it serves is already over (a process that
	// was paused wakes up here).
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	t0 := cd.Clock.Now()
	if !t0.Before(deadline) {
		return nil, false, context.DeadlineExceeded
	}
	// Each attempt gets its own id, drawn only for a write that is sent.
	next.WriteID = cd.rng.writeID()
	wctx, cancel := cd.Clock.ContextWithDeadline(ctx, deadline)
	tok, werr := cd.Decider.WriteEntry(wctx, next)
	cancel()
	if werr == nil || isRaceLost(werr) {
		cd.rtt.add(cd.Clock.Now().Sub(t0))
	}
	if werr == nil {
		next.Token = tok
		cd.pending = nil
		return next, true, nil
	}
	if !isRaceLost(werr) {
		cd.log.Warn("write outcome unknown; reading it back", "election", next.ElectionNumber, "err", werr)
	}
	cd.pending = append(cd.pending, pendingWrite{writeID: next.WriteID, on: next.Token})
	rec, rerr := readRetrying(ctx, cd.Clock, cd.rng, &cd.rtt, cd.Decider, cd.opTimeout(), deadline, func(err error) error {
		cd.log.Warn("reading back a write failed; retrying", "err", err)
		return nil
	})
	if rerr != nil {
		return nil, false, rerr
	}
	if cd.ours(rec) {
		cd.pending = nil
		return rec, true, nil
	}
	return rec, false, nil
}

// tryAcquire writes a new tenure over rec. It returns won and the record as
// the store holds it afterwards.
func (cd *candidate) tryAcquire(ctx context.Context, rec *entry.RaceEntry) (won bool, stored *entry.RaceEntry, err error) {
	// The expiry counts from before the write is sent: conservative.
	t0 := cd.Clock.Now()
	next := &entry.RaceEntry{
		ElectionNumber:   rec.ElectionNumber + 1,
		Term:             rec.ElectionNumber + 1,
		LeaderID:         cd.LeaderID,
		HostPort:         cd.HostPort,
		ConnectionParams: cd.ConnectionParams,
		TermExpiry:       t0.Add(cd.TermLength),
		Token:            rec.Token,
	}
	// Past the expiry it asks for, a win would be worthless.
	stored, won, err = cd.write(ctx, next, next.TermExpiry)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// The term we asked for ran out before we learnt whether we got
		// it: either way it is over. Start again from a fresh read.
		stored, err = cd.read(ctx)
		return false, stored, err
	}
	return won, stored, err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
