package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"

	"github.com/racedecider/leaderelection/internal/backoff"
)

// Acquire campaigns for leadership until ctx ends, then returns ctx's error.
//
// While this candidate leads, OnElected runs with a context that ends with the
// leadership. Losing leadership (a lost race, a term that ran out because the
// store could not be reached) cancels that context, waits for OnElected to
// return, calls OnOusting, and campaigns again. When ctx ends while leading,
// Acquire releases the term (unless DisableRelease) after OnElected has
// returned, so that another candidate takes over at once.
//
// OnElected returning on its own also ends the tenure: the candidate releases
// the term and campaigns again, but only after a pause of one to two
// TermLengths, doubling with each tenure in a row that ends that way (to 8 to
// 16 TermLengths), so that an OnElected that returns at once costs no more
// writes than a leader that keeps its term.
//
// Acquire returns early with an error for an invalid Config; for a stored
// record that does not decode (wrapping ErrCorruptRecord: it never overwrites
// what it cannot read, as the object may belong to something else); and for a
// store that refuses for good (wrapping ErrRefused: permission denied, a
// missing bucket or table), naming the store. Every other store error is
// retried with capped, jittered exponential backoff, throttling included.
func (c Config) Acquire(ctx context.Context) error {
	if err := c.Validate(); err != nil {
		return err
	}
	cd := &candidate{Config: c.withDefaults(), lastTerm: -1, maxSeen: entry.NoElections, rng: newRNG(hooks.Rand(ctx)),
		legacy: hooks.LegacyScheduling(ctx), probe: hooks.HerdProbe(ctx)}
	cd.herd = newHerd(cd.ExpectedCandidates, cd.legacy)
	cd.grid = pollGridFor(ctx, cd.rng)
	cd.log = cd.Logger.With("leader_id", cd.LeaderID, "store", storeName(c.Decider))
	n, _ := c.Decider.(ChangeNotifier)
	cd.waiter = waiter{clock: cd.Clock, n: n, poll: cd.PollInterval, onPushErr: func(err error) {
		cd.log.Warn("waiting for a pushed change failed; polling instead", "err", err)
	}, onPushed: cd.pushed}
	cd.retry = newBackoff(cd.rng, cd.TermLength/64, cd.TermLength/2)
	cd.tenures = newBackoff(cd.rng, 2*cd.TermLength, 16*cd.TermLength)
	if ws, ok := c.Decider.(WriteSpacer); ok {
		cd.spacing = max(ws.MinWriteInterval(), 0)
	}
	// Spacing writes needs the clock check too: it places the commit
	// times the store reports on this host's clock (see writableAt).
	cd.obs = newHook(cd.Observer, cd.Decider, cd.Observer != nil || cd.EnforceMaxClockSkew || cd.spacing > 0, cd.MaxClockSkew, 8*cd.TermLength, cd.log)
	// A waiting candidate on a store that pushes changes may not read
	// for as long as its leader lives: its waits are its requests.
	cd.waiter.h = cd.obs
	cd.obs.send(Event{Kind: EventStarted, LeaderID: cd.LeaderID})
	if cd.spacing > 0 {
		if cd.TermLength < 4*cd.spacing {
			// Extensions come every half term; with a retry each, they
			// would outrun the store.
			cd.log.Warn("TermLength is too short for this store's write rate: extensions may be throttled and terms lost; use at least 4 x its write interval",
				"term_length", cd.TermLength, "min_write_interval", cd.spacing)
		}
	}
	err := cd.campaign(ctx)
	if ctx.Err() != nil {
		cd.releaseUnknownWrite(ctx)
		// An operation's own deadline may have passed at the same time:
		// the caller stopped us, and that is what we report.
		err = ctx.Err()
	}
	cd.obs.stopped(cd.LeaderID, err)
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
	t0 := cd.Clock.Now()
	rec, err := cd.Decider.ReadCurrent(rctx)
	if err == nil && rec == nil {
		err = errNoRecord
	}
	// One read, not retried: the caller has stopped, and a term left
	// unreleased only costs the next leader a wait.
	t1 := cd.Clock.Now()
	cd.obs.request(OpRead, t1.Sub(t0), err, nil)
	if err != nil {
		return
	}
	cd.obs.sample(t0, t1, rec.Token, false)
	if rec.Released {
		return
	}
	if _, ok := cd.ours(rec); ok {
		cd.release(ctx, rec)
	}
}

// candidate is the state of one Acquire call.
type candidate struct {
	Config
	waiter waiter
	log    *slog.Logger
	rng    *rng
	// lastTerm is the tenure last reported to LeaderChanged.
	lastTerm int64
	// maxSeen is the highest ElectionNumber this candidate has seen: every
	// tenure it begins is numbered above it, so that fencing tokens never
	// go down, even when the record is deleted.
	maxSeen int64
	// sawRecord is set when the last record read existed; heldUntil is
	// when a record that disappeared after that may have stopped being
	// held (see observe).
	sawRecord bool
	heldUntil time.Time
	// goneAt is when a read first found no record after one was seen (zero
	// once a record is seen again): reads of no record within a term of it
	// hold the record a term longer each (see observe).
	goneAt time.Time
	// lineage is the Lineage of the last record read (see observe).
	lineage string
	// rtt tracks the store's round trip, which sizes herdJitter; writes
	// tracks write latencies, which time extensions; pushes, the delay of
	// pushed records (see news).
	rtt, writes, pushes latencies
	// deaf is set when the push channel vouched that nothing changed while
	// the record did (see missedChange): the candidate then polls as on a
	// store that cannot push, until the channel brings a change again.
	deaf bool
	// herd is what this candidate has learnt of the herds it meets, which
	// sizes the herd window; draw is its part in the current herd, if any.
	herd herd
	draw draw
	// grid is this candidate's poll schedule (see phase.go).
	grid pollGrid
	// legacy keeps the schedule from before phased polls and the learnt
	// herd window (hooks.WithLegacyScheduling).
	legacy bool
	// probe, if set, is told of every herd window drawn over (tests).
	probe func(herd float64, window time.Duration)
	// pending holds writes whose outcome was unknown and that may still be
	// applied; sentAt is when the write that made the last record of ours
	// was sent.
	pending []pendingWrite
	sentAt  time.Time
	// retry spaces out acquisition attempts that failed without a result;
	// tenures spaces out tenures that OnElected ended early.
	retry, tenures backoff.Backoff
	// spacing is the store's least time between writes to the record
	// (WriteSpacer), 0 if it has none; version is the newest version of the
	// record this candidate knows of, and versionAt when it learnt of it
	// (after the store committed it).
	spacing   time.Duration
	version   entry.LeaderToken
	versionAt time.Time
	// unsureAt is when the last write whose outcome was unknown was
	// answered: it may have been applied up to then.
	unsureAt time.Time
	// slowWarned: the warning about writes too slow for the term was given.
	slowWarned bool
	// obs reports to the Observer and checks the clock; nil when neither
	// is asked for.
	obs *hook
}

// opTimeout bounds one read while campaigning, so a hung store call cannot
// stall a candidate forever.
func (cd *candidate) opTimeout() time.Duration { return cd.TermLength / 2 }

// herdJitter is the window over which candidates that find the record free
// at the same moment spread their writes (see herd.window).
func (cd *candidate) herdJitter() time.Duration {
	if cd.herd.m == 0 {
		// A candidate built without Acquire (tests): nothing learnt yet.
		cd.herd = newHerd(cd.ExpectedCandidates, cd.legacy)
	}
	w := cd.herd.window(cd.news(), cd.TermLength)
	if cd.probe != nil {
		cd.probe(cd.herd.m, w)
	}
	return w
}

// herdDraw draws this candidate's place in a herd: the window's offset and
// width, and the draw (a while from the window's start).
func (cd *candidate) herdDraw() (off, w, j time.Duration) {
	w = cd.herdJitter()
	off = cd.herd.offset(cd.news(), cd.TermLength)
	return off, w, off + cd.rng.jitter(w)
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
	// cold is set until this candidate first waits or draws: a record its
	// first read finds free is free to every candidate started with it.
	cold := true
	for {
		cd.observe(ctx, rec)
		if p, ok := cd.ours(rec); ok && !rec.Released {
			// A write whose outcome was unknown was applied after all.
			cd.sentAt = p.sentAt
			cd.log.Info("an earlier write with an unknown outcome was applied: leading", "term", rec.Term)
			if rec, err = cd.leadAndPause(ctx, rec); err != nil {
				return err
			}
			jittered = false
			continue
		}
		if !cd.free(rec) {
			cold = false
			if rec, err = cd.waitForFree(ctx, rec); err != nil {
				return err
			}
			jittered = true
			continue
		}
		if !jittered {
			if rec, err = cd.spreadOut(ctx, rec, false, cold); err != nil {
				return err
			}
			jittered, cold = true, false
			continue
		}
		if cd.Clock.Now().Before(cd.writableAt(rec.Token)) {
			// Too soon for the store (see WriteSpacer). Every candidate
			// that found the record free waits for the same moment, so
			// draw over the herd window from then (spreadOut), and look
			// again before writing.
			jittered = false
			continue
		}
		jittered = false
		if cd.EnforceMaxClockSkew && cd.obs.tooFar(cd.Clock.Now()) {
			// Not with this clock (see Config.EnforceMaxClockSkew):
			// look again after a poll interval, as old samples age out.
			cd.log.Warn("not campaigning: this host's clock is too far from the store's", "offset", cd.obs.offset.String(), "max_clock_skew", cd.MaxClockSkew)
			if !cd.Clock.SleepFor(ctx, cd.PollInterval) {
				return ctx.Err()
			}
			if rec, err = cd.read(ctx); err != nil {
				return err
			}
			continue
		}
		won, next, err := cd.tryAcquire(ctx, rec)
		if err == nil {
			cd.settle(rec, next, true, won)
		}
		switch {
		case isThrottled(err):
			next = rec
		case err != nil:
			return err
		case won:
			cd.retry.Reset()
			if next, err = cd.leadAndPause(ctx, next); err != nil {
				return err
			}
		}
		if !won && next.Token.SameVersion(rec.Token) {
			// Not applied and nothing changed (an unknown outcome that
			// did not land, throttling): try again, but not at once.
			if !cd.Clock.SleepFor(ctx, max(cd.retry.Next(), cd.spacing)) {
				return ctx.Err()
			}
			if next, err = cd.read(ctx); err != nil {
				return err
			}
		}
		rec = next
	}
}

// leadAndPause leads a tenure that began with rec and, if OnElected ended it
// early, waits before campaigning again (see Acquire).
func (cd *candidate) leadAndPause(ctx context.Context, rec *entry.RaceEntry) (*entry.RaceEntry, error) {
	next, early, err := cd.lead(ctx, rec)
	if err != nil || !early {
		cd.tenures.Reset()
		return next, err
	}
	pause := cd.tenures.Next()
	cd.log.Info("OnElected returned while the term was held; pausing before campaigning again", "pause", pause)
	cd.obs.send(Event{Kind: EventPaused, LeaderID: cd.LeaderID, Expiry: cd.Clock.Now().Add(pause)})
	if !cd.Clock.SleepFor(ctx, pause) {
		return nil, ctx.Err()
	}
	return cd.read(ctx)
}

// free reports whether rec may be taken over now: there is none, it was
// released, or its term is over even on a clock MaxClockSkew behind the
// holder's; and no record that disappeared may still be held.
func (cd *candidate) free(rec *entry.RaceEntry) bool {
	now := cd.Clock.Now()
	return now.After(cd.heldUntil) && (rec.ElectionNumber == entry.NoElections || rec.Released ||
		now.After(rec.TermExpiry.Add(cd.MaxClockSkew)))
}

// takeoverAt is when rec may be taken over, if nothing changes.
func (cd *candidate) takeoverAt(rec *entry.RaceEntry) time.Time {
	at := cd.heldUntil
	if rec.ElectionNumber != entry.NoElections && !rec.Released {
		at = maxTime(at, rec.TermExpiry.Add(cd.MaxClockSkew))
	}
	return at
}

// waitForFree waits until rec's term can be taken over (plus jitter), or a
// change is pushed, or the next poll is due, and returns the record then,
// reading it only when nothing vouches for it.
func (cd *candidate) waitForFree(ctx context.Context, rec *entry.RaceEntry) (*entry.RaceEntry, error) {
	// Just past the takeover time, as free() requires the clock to be after
	// it: waking exactly on it would find the record not yet free and wait
	// again for a moment already here. Every candidate waiting on rec
	// computes the same takeover time (on its own clock), so those that
	// wake for it are a herd: they spread out over the herd window.
	start := cd.takeoverAt(rec).Add(time.Nanosecond)
	cd.draw = draw{}
	off, w, j := cd.herdDraw()
	takeover := start.Add(j)
	until := takeover
	if cd.waiter.n == nil || cd.deaf || !cd.waiter.sure {
		// (With push, the wait ends at the takeover time at the latest: a
		// channel that went silent without failing is found so there, by
		// the write that loses to what it missed: see missedChange.)
		until = minTime(until, cd.nextPoll())
	}
	pushed, quiet, err := cd.waiter.wait(ctx, rec.Token, until)
	switch {
	case err != nil:
		return nil, err
	case quiet && until.Equal(takeover) && !cd.deaf:
		// Nothing changed up to the takeover time: rec is current.
		cd.draw = draw{kind: drawTakeover, off: off, w: w, j: j, start: start, quiet: until}
		return rec, nil
	case pushed != nil && !cd.free(pushed):
		// An extension or a new leader: nothing to do, nothing to read.
		return pushed, nil
	case pushed != nil:
		// A push wakes every waiter at once: spread them out, listening
		// for the first one's write, which makes the others stand down.
		return cd.spreadOut(ctx, pushed, true, false)
	}
	next, err := cd.read(ctx)
	if err != nil {
		return nil, err
	}
	if until.Equal(takeover) {
		cd.draw = draw{kind: drawTakeover, off: off, w: w, j: j, start: start}
		if !cd.free(next) {
			cd.settle(rec, next, false, false)
		}
	}
	return next, nil
}

// nextPoll is when a waiting candidate on a store that cannot push changes
// reads next: on its own poll grid (see phase.go), or, with the legacy
// schedule, PollInterval less a random quarter from now, so that candidates
// started together do not poll, and then write, in step.
func (cd *candidate) nextPoll() time.Time {
	now := cd.Clock.Now()
	if cd.legacy {
		return now.Add(cd.PollInterval - cd.rng.jitter(cd.PollInterval/4))
	}
	return cd.grid.next(now, cd.PollInterval, candidatePollBand)
}

// spreadOut waits a random while over the herd window before this candidate
// writes over rec, which it found free, so that of the candidates that found
// it free together most see the first one's write in time and stand down.
// It listens meanwhile if the store pushes changes, and then rec is current
// if nothing came; otherwise it reads again at the end. (The legacy schedule
// listened only after a push, pushed.)
//
// cold marks the herd of candidates started together, whose first read found
// the record free: what it shows is learnt at once (see herd.sawRival).
func (cd *candidate) spreadOut(ctx context.Context, rec *entry.RaceEntry, pushed, cold bool) (*entry.RaceEntry, error) {
	off, w, j := cd.herdDraw()
	start := cd.Clock.Now()
	if at := cd.writableAt(rec.Token); start.Before(at) {
		// The window opens when the store will take a write (see
		// WriteSpacer), so that the herd's writes are spread from then.
		start = at
	}
	cd.draw = draw{}
	if cd.waiter.n != nil && !cd.deaf && (pushed || !cd.legacy) {
		again, quiet, err := cd.waiter.wait(ctx, rec.Token, start.Add(j))
		switch {
		case err != nil:
			return nil, err
		case again != nil:
			cd.draw = draw{kind: drawListened, off: off, w: w, j: j, start: start, cold: cold}
			if !cd.free(again) {
				cd.settle(rec, again, false, false)
			}
			return again, nil
		case quiet:
			cd.draw = draw{kind: drawListened, off: off, w: w, j: j, start: start, cold: cold, quiet: start.Add(j)}
			return rec, nil
		}
		// The push channel failed, and the wait ran to the end of the
		// draw (or a poll interval): read.
	} else if !cd.Clock.SleepUntil(ctx, start.Add(j)) {
		return nil, ctx.Err()
	}
	next, err := cd.read(ctx)
	if err != nil {
		return nil, err
	}
	cd.draw = draw{kind: drawReread, off: off, w: w, j: j, start: start, cold: cold}
	if !cd.free(next) {
		cd.settle(rec, next, false, false)
	}
	return next, nil
}

// draw is a candidate's part in a herd: the window it drew over (from off,
// w wide), its draw j (from the window's start), and how a rival's draw can be
// timed.
type draw struct {
	kind      drawKind
	off, w, j time.Duration
	// start is when the window began, on this candidate's clock.
	start time.Time
	// cold: the herd of candidates started together (see spreadOut).
	cold bool
	// quiet, if set, is when the wait that ended the draw ended, the push
	// channel vouching that rec had not changed until then.
	quiet time.Time
}

type drawKind int

const (
	drawNone drawKind = iota
	// drawListened: it listened for pushes from start, when it learnt
	// that the record was free (a push or a read).
	drawListened
	// drawTakeover: it slept until start + j, start being the takeover
	// time that every candidate computes from the same record.
	drawTakeover
	// drawReread: it slept from start, when a read found the record
	// free, and read again.
	drawReread
)

// settle learns from the outcome of this candidate's part in a herd over
// rec, a free record: next is what the store holds now, which this candidate
// wrote (wrote: it sent a write) or a rival's new tenure, or neither (no
// outcome yet). The rival's draw is timed when the draw allows it:
//
//   - listened, stood down: the rival's write was sent about a round trip
//     before its push arrived (now);
//   - wrote and lost: the rival's write landed before ours but had not
//     reached us when our draw ended (listened), or landed after our second
//     read (reread), so it drew within a round trip before us; within those
//     bounds, its record says when, on its clock (the TermExpiry it wrote
//     less TermLength), exact between hosts whose clocks agree;
//   - takeover: the rival woke at the same takeover time on its own clock,
//     read, and sent its write at the TermExpiry it wrote less TermLength,
//     also on its clock;
//   - reread, stood down: a rival seen on the second read only says it drew
//     earlier: no timing.
//
// At a start-up (d.cold), the rival's record alone bounds its draw from
// above, listened or wrote: the first reads of a big herd queue at the
// store, so its candidates open their windows up to several round trips
// apart, and the news of the first write reaches them later than any round
// trip they have timed. A rival that wrote before this candidate's window
// opened drew early in a big herd, however late its news came; timed by the
// news, it looked late, and half of 50 candidates started together on a
// server short of cores learnt nothing at their start-up. Between hosts
// whose clocks disagree by more than a round trip, a few candidates started
// together can take their herd for a big one this way, which their first
// hand-over corrects (see herd.sawRival).
func (cd *candidate) settle(rec, next *entry.RaceEntry, wrote, won bool) {
	d := cd.draw
	cd.draw = draw{}
	if won {
		cd.herd.won()
	} else {
		cd.missedChange(rec, next, d.quiet)
	}
	switch {
	case won && d.kind != drawNone && d.w > 0:
		// Its own draw was the first.
		cd.herd.sawRival(d.w, d.j-d.off, cd.news(), d.cold)
		return
	case won:
		cd.herd.quiet()
		return
	case next == nil || next.ElectionNumber == entry.NoElections || next.Released ||
		(rec.ElectionNumber != entry.NoElections && !rec.Released && next.Term == rec.Term):
		// No new tenure (yet): an unknown outcome, throttling.
		return
	}
	if _, ours := cd.ours(next); ours {
		return
	}
	rtt, news := cd.rtt.fastest(), cd.news()
	var x time.Duration
	switch {
	case d.w <= 0:
		if wrote {
			cd.herd.lostRace()
		}
		return
	case d.kind == drawTakeover:
		x = cd.sendTime(next).Sub(d.start) - rtt
		if x < -rtt {
			// Written before the takeover time: a rival that was not in
			// this herd (it saw a release, say).
			return
		}
	case wrote:
		// Lost: the rival drew before this candidate, too late for its
		// write to reach it (within a round trip after a reread, within
		// the news delay when listening). Its record tells when, on its
		// clock: the best guess within those bounds.
		x = cd.sendTime(next).Sub(d.start)
		within := news
		if d.kind == drawReread {
			x -= rtt // it read again before writing
			within = rtt
		}
		if d.cold {
			x = min(x, d.j) // no lower bound: see above
		} else {
			x = min(max(x, d.j-within), d.j)
		}
	case d.kind == drawListened:
		x = cd.Clock.Now().Sub(d.start) - news
		if d.cold {
			x = min(x, cd.sendTime(next).Sub(d.start))
		}
	case d.cold && cd.waiter.n != nil:
		// Reread at a start-up, stood down, by candidates started
		// together on a store that pushes changes, whose channel was
		// not up yet (they read instead of listening, as the rival
		// did): the rival read again at the end of its own draw, then
		// sent its write (at the time its record says, on its clock),
		// which this candidate's read at the end of its draw found.
		x = min(cd.sendTime(next).Sub(d.start)-rtt, d.j)
	default:
		cd.herd.lost()
		cd.herd.quiet()
		return
	}
	if d.off > 0 && x < d.off {
		// The first writer drew in the part of the window this candidate
		// yields: one that learnt less, which says nothing of the herd
		// that draws after it.
		cd.herd.yielded()
		return
	}
	cd.herd.lost()
	cd.herd.sawRival(d.w, max(x-d.off, 0), news, d.cold)
}

// missedChange takes note of next, found in the store after the push channel
// vouched that rec had not changed until quiet. The channel missed next if it
// extends or releases rec's tenure (its leader sent it before the term ran
// out, and the wait went on past that), or if it was sent more than
// MaxClockSkew and a PollInterval before quiet, on its writer's clock. A
// channel that goes silent without failing (a listener behind a pooler that
// drops notifications, a connection dead but not yet found so) would show
// every extension and release only at a takeover time, by a write that loses,
// so the candidate polls instead until the channel brings a change again (see
// pushed). A leader that extends at the last moment can make a sound channel
// look deaf: that costs the reads until its next extension is pushed.
func (cd *candidate) missedChange(rec, next *entry.RaceEntry, quiet time.Time) {
	if quiet.IsZero() || cd.deaf || next == nil || next.ElectionNumber == entry.NoElections || next.Token.SameVersion(rec.Token) {
		return
	}
	sameTenure := rec.ElectionNumber != entry.NoElections && next.Term == rec.Term
	if !sameTenure && !cd.sendTime(next).Add(cd.MaxClockSkew+cd.PollInterval).Before(quiet) {
		return
	}
	cd.deaf = true
	cd.log.Warn("the push channel said the election record had not changed, but it had; polling every PollInterval until a change is pushed again",
		"term", next.Term, "sent", cd.sendTime(next), "quiet_until", quiet)
}

// news is how long the news of a write takes to reach this candidate, which
// sizes the herd window and times a rival's draw: the store's round trip or,
// on a store that pushes changes, the delay of its pushes when that is longer
// (a listener that reads the row after each notification, as PostgreSQL's does
// for changes it cannot verify, brings news a read after the commit),
// measured at every push. It is the typical delay, not the shortest: a push
// reaches the listeners one after another where the server is short of cores
// (50 listeners on 2 cores: over 5 ms, where the shortest takes 0.6), so the
// herd's news comes with that delay, and a rival timed by the shortest looks
// to have drawn later than it did, which unlearns a big herd. Pushes are
// timed against the send time each record carries, on its writer's clock, so
// the shortest delay is taken as at most 4 round trips, so that a clock
// behind the writers' cannot widen the window without bound; how much longer
// the typical is than the shortest is measured on one clock where the pushes
// came from one writer (the leader's extensions).
func (cd *candidate) news() time.Duration {
	rtt := cd.rtt.fastest()
	if cd.pushes.n == 0 || cd.legacy {
		return rtt
	}
	fast := cd.pushes.fastest()
	return max(rtt, min(fast, 4*rtt)+cd.pushes.typical()-fast)
}

// pushed takes note of a record pushed to this candidate by a wait that
// began at began: how long after its writer sent it it arrived (see news).
// A record sent before the wait began was news already (the wait's token was
// stale), and says nothing of the delay.
func (cd *candidate) pushed(rec *entry.RaceEntry, began time.Time) {
	if rec.ElectionNumber == entry.NoElections {
		return
	}
	sent := cd.sendTime(rec)
	if !sent.Before(began) {
		cd.pushes.add(cd.Clock.Now().Sub(sent))
	}
	if cd.deaf && !sent.Before(began.Add(-cd.MaxClockSkew)) {
		// A change made while the channel was listened to (as far as
		// the writer's clock tells), not one it found at once for a
		// token long stale: it delivers again.
		cd.deaf = false
		cd.log.Info("the push channel brought a change again; waiting on it instead of polling")
	}
}

// sendTime is when rec's writer sent it, on the writer's clock: a release
// expires as it is sent; other writes ask for a TermLength from then.
func (cd *candidate) sendTime(rec *entry.RaceEntry) time.Time {
	if rec.Released {
		return rec.TermExpiry
	}
	return rec.TermExpiry.Add(-cd.TermLength)
}

// read reads the record, retrying failures with backoff until ctx ends. A
// corrupt record is returned as an error at once.
func (cd *candidate) read(ctx context.Context) (*entry.RaceEntry, error) {
	return readRetrying(ctx, cd.Clock, cd.rng, &cd.rtt, cd.obs, cd.Decider, cd.opTimeout(), cd.opTimeout(), time.Time{}, func(err error) error {
		if errors.Is(err, entry.ErrCorruptRecord) {
			return fmt.Errorf("leaderelection: not campaigning on a record it cannot read: %w", err)
		}
		cd.log.Warn("reading the election record failed; retrying", "err", err)
		return nil
	})
}

// noteVersion takes note that the store held the version tok at (or before)
// at.
func (cd *candidate) noteVersion(tok entry.LeaderToken, at time.Time) {
	if !tok.SameVersion(cd.version) {
		cd.version, cd.versionAt = tok, at
	}
}

// committedAtMost is when the store committed rec at the latest, on this
// candidate's clock, as far as spacing writes needs it (see writableAt):
// now, or for a release, which the next leader's write follows at once,
// within a round trip of when its writer sent it (its TermExpiry, on that
// writer's clock), this candidate's slowest recent one standing for the
// writer's. A poll finds a release P/3 after it on average, a second or more
// on Cloud Storage, whose reads give commit times in whole seconds. Rate,
// not safety, rests on this: a writer whose clock is behind makes for a
// write too soon, which the store throttles and the engine retries.
func (cd *candidate) committedAtMost(rec *entry.RaceEntry) time.Time {
	now := cd.Clock.Now()
	if cd.spacing <= 0 || !rec.Released {
		return now
	}
	if at := rec.TermExpiry.Add(cd.rtt.slowest()); at.Before(now) {
		return at
	}
	return now
}

// writableAt is the earliest a write conditioned on tok may be sent without
// outrunning the store's write rate (see WriteSpacer): the zero time if the
// store has none, or if nothing is known of the last write before it (tok is
// not the version this candidate knows of, and none of its writes is in
// doubt).
func (cd *candidate) writableAt(tok entry.LeaderToken) time.Time {
	if cd.spacing <= 0 {
		return time.Time{}
	}
	var at time.Time
	if tok.SameVersion(cd.version) {
		// The store committed the version before this candidate learnt
		// of it, often well before (a poll finds a change late): its
		// commit time, placed on this host's clock by the offset the
		// clock check bounds, says how much.
		at = cd.versionAt
		if c, ok := cd.obs.committedBy(tok.CommitTime, cd.Clock.Now()); ok && c.Before(at) {
			at = c
		}
	}
	// A write of this candidate's that may have been applied since (a
	// shutdown that cut an extension short, say) counts as the last.
	if at = maxTime(at, cd.unsureAt); at.IsZero() {
		return at
	}
	return at.Add(cd.spacing)
}

// observe takes note of rec, the record the store holds: it reports a new
// tenure to LeaderChanged, forgets pending writes that can no longer apply,
// and remembers what deletion must not undo.
//
// A record that disappears after this candidate saw one may have been held,
// and extended after it was last read, until a whole TermLength after the
// disappearance is noticed: until then (plus MaxClockSkew) nothing counts as
// free, whatever records come and go meanwhile. The first read of no record
// may be a stale one (served from before the record was last extended, or
// before it existed), so every read of no record within a term of the first
// counts the whole term again: one that came after the deletion holds the
// record until a term after it. Only a candidate whose reads of no record
// were all stale for that whole term can take over early.
func (cd *candidate) observe(ctx context.Context, rec *entry.RaceEntry) {
	cd.noteVersion(rec.Token, cd.committedAtMost(rec))
	// A write conditioned on rec may still apply, unless it was sent so
	// long ago that the term it asked for is over whatever happens: then
	// it is forgotten, so that a store whose writes keep timing out does
	// not make the list grow for ever.
	now := cd.Clock.Now()
	kept := cd.pending[:0]
	for _, p := range cd.pending {
		if p.writeID == rec.WriteID || (p.on.SameVersion(rec.Token) && now.Sub(p.sentAt) < 2*cd.TermLength) {
			kept = append(kept, p)
		}
	}
	cd.pending = kept
	if rec.ElectionNumber == entry.NoElections {
		if cd.sawRecord || now.Before(cd.goneAt.Add(cd.TermLength)) {
			cd.heldUntil = maxTime(cd.heldUntil, now.Add(cd.TermLength+cd.MaxClockSkew))
		}
		if cd.sawRecord {
			cd.sawRecord, cd.goneAt = false, now
			cd.log.Warn("the election record disappeared; waiting a whole term before taking over", "until", cd.heldUntil)
		}
		return
	}
	if cd.sawRecord && rec.Lineage != "" && cd.lineage != "" && rec.Lineage != cd.lineage {
		// Deleted and created again since the last read: a
		// disappearance this candidate did not see, as serious (the
		// creator may never have seen the old record, whose holder may
		// still lead).
		cd.heldUntil = maxTime(cd.heldUntil, cd.Clock.Now().Add(cd.TermLength+cd.MaxClockSkew))
		cd.log.Warn("the election record was deleted and created again; waiting a whole term before taking over", "until", cd.heldUntil)
	}
	cd.sawRecord, cd.lineage, cd.goneAt = true, rec.Lineage, time.Time{}
	cd.maxSeen = max(cd.maxSeen, rec.ElectionNumber)
	// Only a newer tenure is news: a stale read can show an older one.
	if rec.Released || rec.Term <= cd.lastTerm {
		return
	}
	cd.lastTerm = rec.Term
	cd.obs.send(Event{Kind: EventLeaderChanged, LeaderID: rec.LeaderID, Term: rec.Term, Expiry: rec.TermExpiry})
	if cd.LeaderChanged != nil {
		cd.LeaderChanged(ctx, *rec.Clone())
	}
}

// newTenureNumber is the ElectionNumber, and so the Term, of a tenure written
// at t0 over rec: one above both rec and everything this candidate has seen.
// A record created where none exists is numbered from t0 in Unix
// microseconds, so that it stays above the Term of a holder whose record was
// deleted before this candidate saw it, as long as that record saw fewer
// writes since its own creation than microseconds have passed (less
// MaxClockSkew): no store takes a write per microsecond on one object. (A
// coarser unit can be outrun: the model check finds a burst of tenures that
// does. Microseconds also stay below 2^53, exact for JSON readers that parse
// numbers as doubles.)
//
// A record numbered as high as an int64 goes (foreign, or made by hand)
// leaves no number for a tenure above it: an error wrapping ErrCorruptRecord,
// as for a record that does not decode, where the number would wrap to a
// negative fencing token in a record nobody could read.
func (cd *candidate) newTenureNumber(rec *entry.RaceEntry, t0 time.Time) (int64, error) {
	top := max(rec.ElectionNumber, cd.maxSeen)
	if top == math.MaxInt64 {
		return 0, fmt.Errorf("leaderelection: not campaigning on %s: election number %d leaves no room for a tenure above it (hand the record over by deleting it): %w",
			storeName(cd.Decider), top, entry.ErrCorruptRecord)
	}
	n := top + 1
	if rec.ElectionNumber == entry.NoElections {
		n = max(n, t0.UnixMicro())
	}
	return n, nil
}

// tryAcquire writes a new tenure over rec. It returns won and the record as
// the store holds it afterwards.
func (cd *candidate) tryAcquire(ctx context.Context, rec *entry.RaceEntry) (won bool, stored *entry.RaceEntry, err error) {
	// The expiry counts from before the write is sent: conservative.
	t0 := cd.Clock.Now()
	n, err := cd.newTenureNumber(rec, t0)
	if err != nil {
		return false, nil, err
	}
	next := &entry.RaceEntry{
		ElectionNumber:   n,
		Term:             n,
		LeaderID:         cd.LeaderID,
		HostPort:         cd.HostPort,
		ConnectionParams: cd.ConnectionParams,
		TermExpiry:       t0.Add(cd.TermLength),
		Lineage:          rec.Lineage,
		Token:            rec.Token,
	}
	if rec.ElectionNumber == entry.NoElections {
		next.Lineage = cd.rng.writeID()
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
