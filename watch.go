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
		errs = append(errs, errors.New("Decider is nil"))
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
// before any election: the first leader is reported when elected. cb runs on
// Watch's goroutine, so a slow cb delays later reports but loses none of the
// latest state.
func (w WatchConfig) Watch(ctx context.Context, cb func(ctx context.Context, c Change)) error {
	if err := w.Validate(); err != nil {
		return err
	}
	panic("TODO")
}
