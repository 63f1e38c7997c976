package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
)

// DefaultWatchPollInterval is WatchConfig.PollInterval's default.
const DefaultWatchPollInterval = time.Second

// minWatchPollInterval is the shortest WatchConfig.PollInterval.
const minWatchPollInterval = time.Millisecond

// WatchConfig describes an observer of an election: a process that does not
// campaign but wants to know who leads (to route requests to it, say).
type WatchConfig struct {
	// Decider is the store the election runs on. Required.
	Decider RaceDecider

	// MaxClockSkew is the candidates' setting; the watcher reads again when
	// a takeover becomes possible (TermExpiry + MaxClockSkew). Must not be
	// negative.
	MaxClockSkew time.Duration

	// PollInterval bounds how long the watcher goes without reading when
	// the Decider cannot push changes, or its push channel cannot vouch
	// that nothing changed (see Watch): the longest a release, extension
	// or new leader can go unnoticed (while the store answers: a read is
	// abandoned after 10 s without an answer, and failed reads are retried
	// with backoff up to PollInterval or those 10 s, whichever is shorter).
	// Zero means DefaultWatchPollInterval; at least 1 ms (shorter would
	// read the store almost continuously) and at most 24 hours.
	PollInterval time.Duration

	// Clock is the time source; nil means the real clock.
	Clock clocks.Clock

	// OnError, if set, is told of each failed read and each failure of the
	// Decider's push channel. Reads are retried with backoff, and a failed
	// push channel is replaced by polling at PollInterval until it works
	// again; only a refusal (ErrRefused) ends the watch.
	OnError func(ctx context.Context, err error)

	// Logger receives reports of read errors. Nil discards them.
	Logger *slog.Logger

	// Observer is told of each read and each Change (see Observer). Nil
	// costs nothing.
	Observer Observer
}

// ChangeKind says what a Change reports.
type ChangeKind int

// The kinds of Change, in the order a tenure goes through them.
const (
	// LeaderElected: a new tenure began (Entry.Term is its fencing token).
	LeaderElected ChangeKind = iota + 1
	// TermExtended: the leader extended its term to Entry.TermExpiry.
	TermExtended
	// LeaderReleased: the leader stepped down; anyone may acquire.
	LeaderReleased
	// TermExpired: Entry.TermExpiry passed, on the watcher's clock, with no
	// extension seen. The leader has stopped acting; a successor may take
	// over once MaxClockSkew more has passed.
	TermExpired
	// RecordDeleted: the record disappeared (an operator or a lifecycle
	// rule deleted it). Entry is the last record seen before. Candidates
	// that saw it treat its term as held for TermLength + MaxClockSkew
	// after they notice; the next tenure's Term is higher than any before.
	RecordDeleted
)

func (k ChangeKind) String() string {
	switch k {
	case LeaderElected:
		return "elected"
	case TermExtended:
		return "extended"
	case LeaderReleased:
		return "released"
	case TermExpired:
		return "expired"
	case RecordDeleted:
		return "deleted"
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// Change is one event reported by Watch.
type Change struct {
	Kind ChangeKind
	// Entry is the record the change concerns. For TermExpired it is the
	// record whose term ran out; for RecordDeleted, the last one seen.
	Entry entry.RaceEntry
}

// Validate reports every problem with w, naming the offending values.
func (w *WatchConfig) Validate() error {
	errs := nilErrors(w.Decider, w.Observer)
	if w.MaxClockSkew < 0 {
		errs = append(errs, fmt.Errorf("MaxClockSkew (%s) must not be negative", w.MaxClockSkew))
	}
	switch {
	case w.PollInterval < 0 || w.PollInterval > maxInterval:
		errs = append(errs, fmt.Errorf("PollInterval (%s) must be between 0 and %s", w.PollInterval, maxInterval))
	case w.PollInterval != 0 && w.PollInterval < minWatchPollInterval:
		errs = append(errs, fmt.Errorf("PollInterval (%s) must be at least %s: the watcher would read the store almost continuously", w.PollInterval, minWatchPollInterval))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("leaderelection: invalid WatchConfig: %w", errors.Join(errs...))
}

// Watch reports each new leader, extension, release, expiry and deletion to
// cb, once each and in order, until ctx ends; then it returns ctx's error. It
// may start before any election: the first leader is reported when elected.
// The first report describes the record found at start (a leader, a release or
// an expired term). cb runs on Watch's goroutine: a slow cb delays the next
// read.
//
// With a Decider that pushes changes, Watch reads at start, on a push, and,
// while no term is live, every 8 x PollInterval in case the channel went
// silent. It waits at most PollInterval between reads (polls) whenever the
// channel cannot vouch that it would have woken it: while the channel fails;
// from the start, and after any wait that ended without the channel vouching
// that nothing changed (see ChangeNotifier: a channel not up yet, say), until
// a wait ends vouched for; and after a read finds a change the channel said
// had not happened (a deaf channel), until it brings one again. Without push
// it polls at most PollInterval apart (up to a sixteenth sooner, on a schedule
// of its own, so that watchers started together do not read in step), and
// also right at TermExpiry, to tell an expiry from an extension it has not
// seen yet. A record no newer than one already reported (a stale read, as some
// stores and file systems serve) is not reported; a record that disappears is
// reported deleted once three reads within half a PollInterval agree. A record
// whose term had ended when the read that found it began (the attempt that
// succeeded, after any that failed) is reported as TermExpired, never as a
// current leader; so is a reported term that such a read finds followed by
// another tenure, before that tenure. A record whose term ends while a read or
// cb is under way is read again at once, since the leader may have extended it
// meanwhile, and reported expired only if that read finds it unextended; reads
// that keep outlasting the terms they find (a store slower than half a term)
// report nothing, and say so to OnError and Logger once. Failed reads are
// retried with backoff and reported to OnError and Logger; they do not end the
// watch. A store that refuses for good (ErrRefused: permission denied, a
// missing bucket) ends it with that error; an invalid WatchConfig or a nil cb
// ends it at once.
func (w WatchConfig) Watch(ctx context.Context, cb func(ctx context.Context, c Change)) (err error) {
	if err := w.Validate(); err != nil {
		return err
	}
	if cb == nil {
		return errors.New("leaderelection: Watch: nil callback")
	}
	if w.Clock == nil {
		w.Clock = clocks.DefaultClock()
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	w.PollInterval = orDefault(w.PollInterval, DefaultWatchPollInterval)
	h := newHook(w.Observer, w.Decider, false, 0, 0, w.Logger)
	h.send(Event{Kind: EventWatchStarted})
	defer func() { h.send(Event{Kind: EventWatchStopped, Err: err}) }()
	if h != nil {
		user := cb
		cb = func(ctx context.Context, c Change) {
			h.send(Event{Kind: EventWatchChange, Change: c.Kind, LeaderID: c.Entry.LeaderID, Term: c.Entry.Term, Expiry: c.Entry.TermExpiry})
			user(ctx, c)
		}
	}
	n, _ := w.Decider.(ChangeNotifier)
	wt := &waiter{clock: w.Clock, n: n, poll: w.PollInterval, h: h, onPushErr: func(err error) {
		w.report(ctx, fmt.Errorf("leaderelection: watch on %s: waiting for a pushed change failed; polling: %w", storeName(w.Decider), err))
	}}

	r := newRNG(hooks.Rand(ctx))
	// A polling watcher reads on a grid of its own (see phase.go), so that
	// watchers started together do not read in step; the legacy schedule
	// reads a PollInterval after the last read.
	var grid *pollGrid
	if !hooks.LegacyScheduling(ctx) {
		g := pollGridFor(ctx, r)
		grid = &g
	}
	var (
		last    *entry.RaceEntry // last record reported (an absence once a deletion is)
		top     *entry.RaceEntry // the newest record reported
		expired bool             // last's expiry has been reported
		// deaf: the push channel vouched that nothing changed while the
		// record did; until it brings a change again, the watcher polls.
		deaf bool
	)
	// began: when the read (or wait) that brought rec began. A term is
	// over only for a read begun at or after its expiry: one begun before
	// may predate an extension, however late it (or cb) ends.
	rec, began, err := w.read(ctx, h, r)
	pushed, vouched := false, false // rec came from the push channel; a wait it vouched for came before rec was read
	// outrun counts reads in a row whose record's term ended while they
	// were under way (see below).
	outrun := 0
	for err == nil {
		if pushed && deaf {
			deaf = false
			w.Logger.Info("leaderelection: watch on " + storeName(w.Decider) + ": the push channel brought a change again; waiting on it instead of polling")
		}
		if !exists(rec) && exists(last) {
			// A deletion, or a stale read from before the record was
			// written (some stores and file systems serve one after a
			// newer write).
			if rec, err = w.confirmAbsence(ctx, h, r, rec); err != nil {
				break
			}
		}
		if exists(rec) && top != nil && !rec.NewerThan(top) {
			// Not newer than a record already reported: a stale read.
			// Terms rise across a deletion too, so a record written
			// after one is newer even though its election number
			// starts again.
			rec = last
		}
		kind, news := classify(last, rec)
		// A record the push channel brought that is not news (one that
		// lags behind a deletion, or misbehaves) might come again at
		// once: poll for the next.
		stale := pushed && !news
		if vouched && news && !deaf {
			// News read right after the channel vouched there was none:
			// it missed it, as a channel that goes silent without
			// failing does (a listener behind a pooler that drops
			// notifications, a connection dead but not yet found so).
			// Following it would show each change only when a term
			// ends (or 8 polls later), so poll instead. A change that
			// landed between the wait's end and the read looks the
			// same, and costs the polls until the next push.
			deaf = true
			w.report(ctx, fmt.Errorf("leaderelection: watch on %s: the push channel said the election record had not changed, but it had; polling every PollInterval until it brings a change again", storeName(w.Decider)))
		}
		if news && (kind == LeaderElected || kind == TermExtended) && began.Before(rec.TermExpiry) && !w.Clock.Now().Before(rec.TermExpiry) {
			// Its term ended while the read was under way: neither a
			// leader (the store may have served it after the expiry)
			// nor an expiry (the leader may have extended it since).
			// Read again. One such read is a read that straddled an
			// expiry; two in a row found a leader that extended its
			// term, and a read that outlasted what was left of it
			// again: until reads get quicker, the watcher cannot
			// tell whether anyone leads, so it says so (once).
			if outrun++; outrun == 2 {
				w.report(ctx, fmt.Errorf("leaderelection: watch on %s: reads take longer than what is left of the term they find (the last took %v, its term had %v left when it began); nothing is reported until one ends within its term",
					storeName(w.Decider), w.Clock.Now().Sub(began), rec.TermExpiry.Sub(began)))
			}
			rec, began, err = w.read(ctx, h, r)
			pushed, vouched = false, false
			continue
		}
		outrun = 0
		if news {
			if kind == LeaderElected && exists(last) && !last.Released && !expired && !began.Before(last.TermExpiry) {
				// Another tenure, found by a read begun after the
				// last one's term ended unreported (reads failed
				// across its expiry, say): that expiry is news too,
				// and came first.
				cb(ctx, Change{Kind: TermExpired, Entry: *last.Clone()})
			}
			c := Change{Kind: kind, Entry: *rec.Clone()}
			if kind == RecordDeleted {
				c.Entry = *last.Clone()
			}
			last, expired = rec, false
			if exists(rec) {
				top = rec
			}
			if (kind == LeaderElected || kind == TermExtended) && !began.Before(rec.TermExpiry) {
				// Its term was over when the read began: the news is
				// an expiry, not a leader.
				c.Kind, expired = TermExpired, true
			}
			cb(ctx, c)
		}
		// live: a term whose expiry has yet to be reported.
		live := exists(last) && !last.Released && !expired
		// (A term that ended since the read began is read again at once:
		// next waits no later than its expiry.)
		if live && !began.Before(last.TermExpiry) && sameRecord(last, rec) {
			expired = true
			cb(ctx, Change{Kind: TermExpired, Entry: *last.Clone()})
			pushed = false // the news was the expiry
			continue
		}
		rec, began, pushed, vouched, err = w.next(ctx, wt, h, r, grid, last, live, stale, deaf || !wt.sure)
	}
	return err
}

// absenceReads is how many reads in a row must find no record before Watch
// reports a deletion.
const absenceReads = 3

// confirmAbsence reads again, with backoff within half a PollInterval, after
// a read found no record where there was one: a stale read seldom repeats,
// a deletion does. It returns the first record found, or the absence.
func (w *WatchConfig) confirmAbsence(ctx context.Context, h *hook, r *rng, absent *entry.RaceEntry) (*entry.RaceEntry, error) {
	b := newBackoff(r, w.PollInterval/16, w.PollInterval/4)
	for range absenceReads - 1 {
		if !w.Clock.SleepFor(ctx, b.Next()) {
			return nil, ctx.Err()
		}
		rec, _, err := w.read(ctx, h, r)
		if err != nil || exists(rec) {
			return rec, err
		}
		absent = rec
	}
	return absent, nil
}

// next waits for the next moment worth a look and returns the record then,
// when the read (or the wait on the push channel) that brought it began,
// whether the push channel brought it, and whether it vouched that nothing
// changed before the record was read. stale: the last record the channel
// brought was not news, so that waiting on it again might bring it back at
// once, in a loop: this once, poll. poll: the channel missed a change, or did
// not vouch for its last wait; wait on it no more than a PollInterval.
func (w *WatchConfig) next(ctx context.Context, wt *waiter, h *hook, r *rng, grid *pollGrid, rec *entry.RaceEntry, live, stale, poll bool) (next *entry.RaceEntry, began time.Time, pushed, vouched bool, err error) {
	if rec == nil {
		rec = &entry.RaceEntry{ElectionNumber: entry.NoElections}
	}
	now := w.Clock.Now()
	var until time.Time
	switch {
	case wt.n != nil:
		until = now.Add(w.PollInterval * pushedPollFactor)
	case grid != nil:
		until = grid.next(now, w.PollInterval, watcherPollBand)
	default:
		until = now.Add(w.PollInterval)
	}
	exists := rec.ElectionNumber != entry.NoElections
	if live {
		until = minTime(until, rec.TermExpiry)
	} else if takeover := rec.TermExpiry.Add(w.MaxClockSkew); exists && !rec.Released && now.Before(takeover) && wt.n == nil {
		until = minTime(until, takeover)
	}
	// A wait the channel vouches for is read after all: where it is up to
	// the term's end, only a read tells a term that ran out from one whose
	// extensions a deaf channel (a listener behind a pooler that drops
	// notifications, a connection dead but not yet found so) failed to
	// bring, and reporting an expiry is reporting the leader gone. It costs
	// a read per term that ends unextended; otherwise the push comes first.
	if stale || poll {
		until = minTime(until, now.Add(w.PollInterval))
	}
	if stale {
		wt.sure = false // as if the channel had answered amiss
		if !w.Clock.SleepUntil(ctx, until) {
			return nil, time.Time{}, false, false, ctx.Err()
		}
	} else {
		got, quiet, err := wt.wait(ctx, rec.Token, until)
		switch {
		case err != nil:
			return nil, time.Time{}, false, false, err
		case got != nil:
			// Current at some moment since the wait began.
			return got, now, true, false, nil
		}
		vouched = quiet
	}
	rec, began, err = w.read(ctx, h, r)
	return rec, began, false, vouched, err
}

// watchReadTimeout bounds one read by a watcher: long enough for a slow
// store, as a read that always times out would never converge, and no
// longer, as a read that hangs (a connection black-holed) blinds the
// watcher until it is abandoned. Failed reads are retried no less often than
// healthy ones are made: the backoff stops at PollInterval (or at this
// timeout, if shorter).
const watchReadTimeout = 10 * time.Second

// watchRetryFloor bounds the backoff of a watcher's failed reads from below
// (to a millisecond at first), however short its PollInterval.
const watchRetryFloor = 64 * time.Millisecond

// read reads the record, retrying failures, and tells when the read that
// found it began: no earlier than the last failure, after which it was sent.
func (w *WatchConfig) read(ctx context.Context, h *hook, r *rng) (rec *entry.RaceEntry, began time.Time, err error) {
	began = w.Clock.Now()
	rec, err = readRetrying(ctx, w.Clock, r, nil, h, w.Decider, watchReadTimeout, min(max(w.PollInterval, watchRetryFloor), watchReadTimeout), time.Time{}, func(err error) error {
		began = w.Clock.Now()
		w.report(ctx, fmt.Errorf("leaderelection: watch on %s: reading the election record failed; retrying: %w", storeName(w.Decider), err))
		return nil
	})
	return rec, began, err
}

func (w *WatchConfig) report(ctx context.Context, err error) {
	w.Logger.Warn(err.Error())
	if w.OnError != nil {
		w.OnError(ctx, err)
	}
}

// classify says what rec is to a watcher that last reported last, and whether
// it is news at all.
func classify(last, rec *entry.RaceEntry) (ChangeKind, bool) {
	switch {
	case !exists(rec):
		return RecordDeleted, exists(last)
	case exists(last) && sameRecord(last, rec):
		return 0, false
	case rec.Released:
		return LeaderReleased, true
	case !exists(last) || last.Term != rec.Term:
		return LeaderElected, true
	}
	return TermExtended, true
}

// exists reports whether e is a record, not nil or the absence of one.
func exists(e *entry.RaceEntry) bool { return e != nil && e.ElectionNumber != entry.NoElections }

// sameRecord reports whether a and b are the same write: a record re-created
// after a deletion may reuse an election number, never a Term.
func sameRecord(a, b *entry.RaceEntry) bool {
	return a.Term == b.Term && a.ElectionNumber == b.ElectionNumber
}
