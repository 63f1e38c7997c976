package leaderelection

import (
	"sync/atomic"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/internal/hooks"
)

func init() {
	hooks.TimeViewEnded = func(tv any) bool { return tv.(*TimeView).v.Load().ended }
	hooks.EndTimeView = func(tv any) { tv.(*TimeView).end() }
	hooks.ReturnedEarly = func(tv any) { tv.(*TimeView).returnedEarly.Store(true) }
}

// TimeView is an atomically updated view of when the current leadership term
// ends. The leader's TimeView only ever holds an expiry the store has accepted,
// and is set into the past before a release is written.
//
// A leader must check ValueInFuture (or Remaining) right before every action
// that needs leadership: the elected context is cancelled by a goroutine and
// may be observed late under CPU contention or after a wall-clock step, but
// the TimeView is never late. Comparing Get with a clock checks the wall
// clock alone, and a wall clock stepped back would revive a term the engine
// has already ended.
//
// The term is held only while two clocks agree: the wall clock, against the
// stored expiry that successors judge the record by, and the monotonic clock,
// against the time the winning write was sent plus TermLength. A host that is
// suspended, or whose wall clock is stepped, sees one of them jump and not
// the other; ValueInFuture turns false when either says the term is over.
type TimeView struct {
	clock clocks.Clock
	// One pointer holds the expiry and the term so that a reader sees both
	// from the same update.
	v atomic.Pointer[termState]
	// returnedEarly: OnElected, as a Guard wraps it, returned while the
	// term was held (hooks.ReturnedEarly).
	returnedEarly atomic.Bool
}

type termState struct {
	expiry time.Time // wall clock only, as stored
	// monoEnd is the same end on the monotonic clock: the write's send time
	// (as the clock read it, with its monotonic reading if it has one) plus
	// TermLength. Fake clocks have no monotonic reading; then it is the
	// wall-clock expiry again.
	monoEnd time.Time
	term    int64
	// ended: the engine ended the term (end). It stays over whatever the
	// clocks do next: a wall clock stepped back must not revive it, and a
	// clock without monotonic readings (a fake) has no other guard.
	ended bool
}

func newTimeView(clock clocks.Clock, expiry, monoEnd time.Time, term int64) *TimeView {
	tv := &TimeView{clock: clock}
	tv.v.Store(&termState{expiry: expiry.Round(0), monoEnd: monoEnd, term: term})
	return tv
}

// extend moves the view to a new expiry, unless the term has already run
// out or ended: a term seen over (by the watchdog, a Guard, the user) stays
// over, even if an extension that was in flight lands afterwards (a process
// paused past its expiry wakes up to the answer). It reports whether the view
// moved.
func (t *TimeView) extend(expiry, monoEnd time.Time) bool {
	for {
		s := t.v.Load()
		if s.ended || t.left(s) <= 0 {
			t.v.CompareAndSwap(s, s.over())
			return false
		}
		if t.v.CompareAndSwap(s, &termState{expiry: expiry.Round(0), monoEnd: monoEnd, term: s.term}) {
			return true
		}
	}
}

// over returns s marked ended.
func (s *termState) over() *termState {
	c := *s
	c.ended = true
	return &c
}

// end sets the view into the past for good: the term is over for this
// process.
func (t *TimeView) end() {
	now := t.clock.Now()
	s := t.v.Load()
	t.v.Store(&termState{expiry: minTime(s.expiry, now).Round(0), monoEnd: minTime(s.monoEnd, now), term: s.term, ended: true})
}

// Get returns the instant, on this process's wall clock, at which the current
// term ends unless it is extended: the expiry stored in the record, or the
// instant the engine ended the term. Use it to report or pass on the expiry;
// ask ValueInFuture whether the term is still held.
func (t *TimeView) Get() time.Time { return t.v.Load().expiry }

// Term returns the fencing token of the tenure this TimeView belongs to: the
// entry.RaceEntry Term. Pass it to downstream systems with every write they
// must be able to reject once a newer leader exists.
func (t *TimeView) Term() int64 { return t.v.Load().term }

// ValueInFuture reports whether the term has not yet ended on this process's
// clocks: whether it may still act as leader this instant.
func (t *TimeView) ValueInFuture() bool { return t.Remaining() > 0 }

// Remaining returns how long the term has left on this process's clocks: the
// shorter of what its wall clock and its monotonic clock say. It is zero or
// negative once the term is over.
//
// A term seen over stays over: an extension that lands later does not revive
// it.
func (t *TimeView) Remaining() time.Duration {
	s := t.v.Load()
	left := t.left(s)
	// Until it sticks: an extension may have replaced s since it was
	// loaded, on a clock read a moment before this one, and it must not
	// revive a term this call saw over.
	for left <= 0 && !s.ended && !t.v.CompareAndSwap(s, s.over()) {
		s = t.v.Load()
	}
	return left
}

// left is how long s has left on this process's clocks (at most zero once
// ended).
func (t *TimeView) left(s *termState) time.Duration {
	now := t.clock.Now()
	// Round(0) strips the monotonic reading, so that the first comparison
	// is on the wall clock; Sub of two readings that both carry one uses
	// the monotonic clock.
	left := min(s.expiry.Sub(now.Round(0)), s.monoEnd.Sub(now))
	if s.ended {
		return min(left, 0)
	}
	return left
}
