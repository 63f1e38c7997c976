package sim

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/internal/skewclock"
)

// hostClock is one host's clock: skewclock's fixed offset from virtual time,
// plus a constant rate error. It reads
//
//	origin + (inner - origin) x rate
//
// where inner is the skewclock's reading and origin its reading when the run
// started; durations of this clock last 1/rate of a virtual duration. Every
// absolute time is converted to the skewclock's frame before waiting, and
// every relative one is scaled, so waits end when this clock's Now says they
// should.
type hostClock struct {
	sk     *skewclock.Clock
	origin time.Time
	rate   float64
	// step is added to every reading: a wall-clock step (NTP) since the
	// start. Waits already armed keep their virtual instant, as timers on
	// a real host run on its monotonic clock.
	step atomic.Int64
	// backSteps counts the steps back; forward sums the steps forward,
	// which a watchdog's timer armed before them does not see.
	backSteps, forward atomic.Int64
	// steps is every step, for the offset checks (see offsetRange).
	mu    sync.Mutex
	steps []stepRec
}

func newHostClock(start time.Time, offset time.Duration, drift float64) *hostClock {
	return &hostClock{
		sk:     skewclock.New(clocks.DefaultClock(), offset),
		origin: start.Add(offset),
		rate:   1 + drift,
	}
}

func (h *hostClock) toLocal(inner time.Time) time.Time {
	st := time.Duration(h.step.Load())
	if h.rate == 1 {
		return inner.Add(st)
	}
	return h.origin.Add(time.Duration(float64(inner.Sub(h.origin))*h.rate) + st)
}

// toInner rounds up, so that a wait for local ends when this clock reads
// local or later, never a nanosecond early.
func (h *hostClock) toInner(local time.Time) time.Time {
	local = local.Add(-time.Duration(h.step.Load()))
	if h.rate == 1 {
		return local
	}
	return h.origin.Add(time.Duration(math.Ceil(float64(local.Sub(h.origin))/h.rate)) + 1)
}

// dur converts a duration of this clock to a virtual one (rounding up).
func (h *hostClock) dur(d time.Duration) time.Duration {
	if h.rate == 1 {
		return d
	}
	return time.Duration(math.Ceil(float64(d) / h.rate))
}

// Now reads the clock without any fault: what the checker uses.
func (h *hostClock) Now() time.Time { return h.toLocal(h.sk.Now()).Round(0) }

// virtualWhen returns the virtual instant at which this clock reads local.
func (h *hostClock) virtualWhen(local time.Time) time.Time {
	return h.toInner(local).Add(-h.sk.Offset)
}

// procClock is the clock one incarnation's engine sees. Every call passes
// the process's gate first, so a paused or crashed process makes no progress
// through its clock; a reading can also be followed by a stall (the process
// pauses right after reading the time, then uses the stale value).
type procClock struct {
	h *hostClock
	p *proc
	// sim marks the clock of the sim's own workers and clients, which
	// the engine's breakages (negative controls) leave alone.
	sim bool
}

var _ clocks.Clock = (*procClock)(nil)

func (c *procClock) Now() time.Time {
	c.p.gate()
	t := c.h.Now()
	c.p.afterClockRead()
	return t
}

func (c *procClock) Until(t time.Time) time.Duration {
	return t.Sub(c.Now())
}

func (c *procClock) SleepUntil(ctx context.Context, until time.Time) bool {
	c.p.gate()
	ok := c.h.sk.SleepUntil(ctx, c.h.toInner(until))
	c.p.gate()
	return ok
}

func (c *procClock) SleepFor(ctx context.Context, d time.Duration) bool {
	c.p.gate()
	if c.p.s != nil && c.p.s.opt.NoSleep && !c.sim && d < c.p.s.sc.Term {
		// The broken backoff of a negative control: a thousand times too
		// short.
		d /= 1000
	}
	ok := c.h.sk.SleepFor(ctx, c.h.dur(d))
	c.p.gate()
	return ok
}

func (c *procClock) AfterFunc(d time.Duration, f func()) clocks.StopTimer {
	c.p.gate()
	if c.p.s != nil && c.p.s.opt.LateTimers {
		d += c.p.s.sc.Term / 4
	}
	return c.h.sk.AfterFunc(c.h.dur(d), func() {
		c.p.gate()
		f()
	})
}

func (c *procClock) NewTimer(d time.Duration) clocks.Timer {
	c.p.gate()
	return c.h.sk.NewTimer(c.h.dur(d))
}

func (c *procClock) ContextWithDeadline(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	return c.h.sk.ContextWithDeadline(ctx, c.h.toInner(t))
}

func (c *procClock) ContextWithDeadlineCause(ctx context.Context, t time.Time, cause error) (context.Context, context.CancelFunc) {
	return c.h.sk.ContextWithDeadlineCause(ctx, c.h.toInner(t), cause)
}

func (c *procClock) ContextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return c.h.sk.ContextWithTimeout(ctx, c.h.dur(d))
}

func (c *procClock) ContextWithTimeoutCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return c.h.sk.ContextWithTimeoutCause(ctx, c.h.dur(d), cause)
}
