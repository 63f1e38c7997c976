package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
)

// DefaultWatchPollInterval is WatchConfig.PollInterval's default.
const DefaultWatchPollInterval = time.Second

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
	// the Decider cannot push changes: the longest a release, extension or
	// new leader can go unnoticed. Zero means DefaultWatchPollInterval.
	PollInterval time.Duration

	// Clock is the time source; nil means the real clock.
	Clock clocks.Clock

	// OnError, if set, is told of each failed read. Reads are retried with
	// backoff; errors never end the watch.
	OnError func(ctx context.Context, err error)

	// Logger receives reports of read errors. Nil discards them.
	Logger *slog.Logger
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
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// Change is one event reported by Watch.
type Change struct {
	Kind ChangeKind
	// Entry is the record the change concerns. For TermExpired it is the
	// record whose term ran out.
	Entry entry.RaceEntry
}

// Validate reports every problem with w, naming the offending values.
func (w *WatchConfig) Validate() error {
	var errs []error
	if w.Decider == nil {
		errs = append(errs, errors.New("nil Decider"))
	}
	if w.MaxClockSkew < 0 {
		errs = append(errs, fmt.Errorf("MaxClockSkew (%s) must not be negative", w.MaxClockSkew))
	}
	if w.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("PollInterval (%s) must not be negative", w.PollInterval))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("leaderelection: invalid WatchConfig: %w", errors.Join(errs...))
}

// Watch reports each new leader, extension, release and expiry to cb, once
// each and in order, until ctx ends; then it returns ctx's error. It may start
// before any election: the first leader is reported when elected. The first
// report describes the record found at start (a leader, a release or an
// expired term). cb runs on Watch's goroutine: a slow cb delays the next read.
//
// With a Decider that pushes changes, Watch reads only at start and on a push.
// Otherwise it reads every PollInterval, and also right at TermExpiry, to tell
// an expiry from an extension it has not seen yet. Failed reads are retried
// with backoff and reported to OnError and Logger; they never end the watch.
func (w WatchConfig) Watch(ctx context.Context, cb func(ctx context.Context, c Change)) error {
	if err := w.Validate(); err != nil {
		return err
	}
	if w.Clock == nil {
		w.Clock = clocks.DefaultClock()
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	w.PollInterval = orDefault(w.PollInterval, DefaultWatchPollInterval)
	notifier, _ := w.Decider.(ChangeNotifier)

	var (
		last    *entry.RaceEntry // last record reported
		expired bool             // last's expiry has been reported
	)
	rec, err := w.read(ctx)
	for err == nil {
		if kind, ok := classify(last, rec); ok {
			last, expired = rec, false
			cb(ctx, Change{Kind: kind, Entry: *rec.Clone()})
		}
		// live: a term whose expiry has yet to be reported.
		live := last != nil && !last.Released && !expired
		if live && !w.Clock.Now().Before(last.TermExpiry) && last.ElectionNumber == rec.ElectionNumber {
			expired = true
			cb(ctx, Change{Kind: TermExpired, Entry: *last.Clone()})
			continue
		}
		rec, err = w.next(ctx, notifier, rec, live)
	}
	return err
}

// next waits for the next moment worth a look and returns the record then.
func (w *WatchConfig) next(ctx context.Context, n ChangeNotifier, rec *entry.RaceEntry, live bool) (*entry.RaceEntry, error) {
	now := w.Clock.Now()
	var until time.Time
	switch {
	case n != nil && live:
		until = rec.TermExpiry
	case n != nil:
		until = now.Add(365 * 24 * time.Hour) // only a push matters
	default:
		until = now.Add(w.PollInterval)
		if live {
			until = minTime(until, rec.TermExpiry)
		} else if takeover := rec.TermExpiry.Add(w.MaxClockSkew); now.Before(takeover) && !rec.Released {
			until = minTime(until, takeover)
		}
	}
	pushed, quiet, err := waitForChangeUntil(ctx, w.Clock, n, rec.Token, until)
	switch {
	case err != nil:
		return nil, err
	case pushed != nil:
		return pushed, nil
	case quiet:
		// The term ran out with no push: nothing changed, no read needed.
		return rec, nil
	}
	return w.read(ctx)
}

func (w *WatchConfig) read(ctx context.Context) (*entry.RaceEntry, error) {
	return readRetrying(ctx, w.Clock, nil, nil, w.Decider, max(w.PollInterval, time.Second), time.Time{}, func(err error) error {
		w.Logger.Warn("watch: reading the election record failed; retrying", "err", err)
		if w.OnError != nil {
			w.OnError(ctx, err)
		}
		return nil
	})
}

// classify says what rec is to a watcher that last reported last, and whether
// it is news at all.
func classify(last, rec *entry.RaceEntry) (ChangeKind, bool) {
	switch {
	case rec.ElectionNumber == entry.NoElections:
		return 0, false
	case last != nil && rec.ElectionNumber == last.ElectionNumber:
		return 0, false
	case last != nil && rec.ElectionNumber < last.ElectionNumber:
		// The record was deleted and elections began again: whatever
		// it holds is news.
		if rec.Released {
			return LeaderReleased, true
		}
		return LeaderElected, true
	case rec.Released:
		return LeaderReleased, true
	case last == nil || last.Term != rec.Term:
		return LeaderElected, true
	}
	return TermExtended, true
}
