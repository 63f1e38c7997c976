package leaderelection

import (
	"sync/atomic"
	"time"

	clocks "github.com/vimeo/go-clocks"
)

// TimeView is an atomically updated view of when the current leadership term
// ends. The leader's TimeView only ever holds an expiry the store has accepted,
// and is set into the past before a release is written.
//
// A leader must check ValueInFuture (or compare Get with its clock) right
// before every action that needs leadership: the elected context is cancelled
// by a goroutine and may be observed late under CPU contention, but the
// TimeView is never late.
type TimeView struct {
	clock clocks.Clock
	// One pointer holds the expiry and the term so that a reader sees both
	// from the same update.
	v atomic.Pointer[termState]
}

type termState struct {
	expiry time.Time
	term   int64
}

func newTimeView(clock clocks.Clock, expiry time.Time, term int64) *TimeView {
	tv := &TimeView{clock: clock}
	tv.set(expiry, term)
	return tv
}

func (t *TimeView) set(expiry time.Time, term int64) {
	t.v.Store(&termState{expiry: expiry, term: term})
}

// Get returns the instant, on this process's clock, at which the current term
// ends unless it is extended.
func (t *TimeView) Get() time.Time { return t.v.Load().expiry }

// Term returns the fencing token of the tenure this TimeView belongs to: the
// entry.RaceEntry Term. Pass it to downstream systems with every write they
// must be able to reject once a newer leader exists.
func (t *TimeView) Term() int64 { return t.v.Load().term }

// ValueInFuture reports whether the term has not yet ended on this process's
// clock: whether it may still act as leader this instant.
func (t *TimeView) ValueInFuture() bool {
	return t.clock.Now().Before(t.Get())
}
