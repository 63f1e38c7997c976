// Package skewclock provides a clock that reads a fixed offset away from
// another, for tests of clock skew.
//
// github.com/vimeo/go-clocks/offset (v1.3.0) adds its offset in Now but also
// adds it when turning an absolute time into a wait (Until, SleepUntil,
// ContextWithDeadline), so its waits end 2 x offset away from where its Now
// says they should. This clock converts both ways consistently.
package skewclock

import (
	"context"
	"time"

	clocks "github.com/vimeo/go-clocks"
)

// Clock reads Offset later than Inner. Relative waits are unchanged; absolute
// times are converted to Inner's reading before waiting.
type Clock struct {
	Inner  clocks.Clock
	Offset time.Duration
}

// New returns a clock that reads offset later than inner (earlier when
// offset is negative).
func New(inner clocks.Clock, offset time.Duration) *Clock {
	return &Clock{Inner: inner, Offset: offset}
}

var _ clocks.Clock = (*Clock)(nil)

func (c *Clock) inner(t time.Time) time.Time { return t.Add(-c.Offset) }

// Now returns Inner's time plus Offset.
func (c *Clock) Now() time.Time { return c.Inner.Now().Add(c.Offset) }

// Until returns how long until this clock reads t.
func (c *Clock) Until(t time.Time) time.Duration { return c.Inner.Until(c.inner(t)) }

// SleepUntil sleeps until this clock reads until, or ctx ends.
func (c *Clock) SleepUntil(ctx context.Context, until time.Time) bool {
	return c.Inner.SleepUntil(ctx, c.inner(until))
}

// SleepFor sleeps for d, or until ctx ends.
func (c *Clock) SleepFor(ctx context.Context, d time.Duration) bool { return c.Inner.SleepFor(ctx, d) }

// AfterFunc runs f after d.
func (c *Clock) AfterFunc(d time.Duration, f func()) clocks.StopTimer { return c.Inner.AfterFunc(d, f) }

// NewTimer returns a timer firing after d.
func (c *Clock) NewTimer(d time.Duration) clocks.Timer { return c.Inner.NewTimer(d) }

// ContextWithDeadline returns a context that ends when this clock reads t.
func (c *Clock) ContextWithDeadline(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	return c.Inner.ContextWithDeadline(ctx, c.inner(t))
}

// ContextWithDeadlineCause is ContextWithDeadline with a cause.
func (c *Clock) ContextWithDeadlineCause(ctx context.Context, t time.Time, cause error) (context.Context, context.CancelFunc) {
	return c.Inner.ContextWithDeadlineCause(ctx, c.inner(t), cause)
}

// ContextWithTimeout returns a context that ends after d.
func (c *Clock) ContextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return c.Inner.ContextWithTimeout(ctx, d)
}

// ContextWithTimeoutCause is ContextWithTimeout with a cause.
func (c *Clock) ContextWithTimeoutCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return c.Inner.ContextWithTimeoutCause(ctx, d, cause)
}
