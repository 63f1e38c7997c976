package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestHostClockWaitsEndOnItsOwnTime checks the offset-and-drift clock: an
// absolute wait ends when the clock's own Now reaches the target (not a
// nanosecond early, and within a microsecond), and a relative wait lasts the
// clock's duration.
func TestHostClockWaitsEndOnItsOwnTime(t *testing.T) {
	for _, c := range []struct {
		offset time.Duration
		drift  float64
	}{{0, 0}, {150 * time.Millisecond, 0}, {-150 * time.Millisecond, 2e-4}, {40 * time.Millisecond, -3e-4}} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			h := newHostClock(start, c.offset, c.drift)
			p := &proc{}
			pc := &procClock{h: h, p: p}
			if got := h.Now().Sub(start); got != c.offset {
				t.Errorf("offset %v: reads %v at the start", c.offset, got)
			}
			time.Sleep(time.Hour)
			want := c.offset + time.Hour + time.Duration(float64(time.Hour)*c.drift)
			if got := h.Now().Sub(start); (got - want).Abs() > time.Microsecond {
				t.Errorf("offset %v drift %v: reads %v after an hour, want %v", c.offset, c.drift, got, want)
			}
			target := h.Now().Add(10 * time.Second)
			pc.SleepUntil(context.Background(), target)
			if now := h.Now(); now.Before(target) || now.Sub(target) > time.Microsecond {
				t.Errorf("offset %v drift %v: SleepUntil(%v) woke at %v", c.offset, c.drift, target, now)
			}
			target = h.Now().Add(3 * time.Second)
			ctx, cancel := pc.ContextWithDeadline(context.Background(), target)
			<-ctx.Done()
			cancel()
			if now := h.Now(); now.Before(target) || now.Sub(target) > time.Microsecond {
				t.Errorf("offset %v drift %v: deadline %v passed at %v", c.offset, c.drift, target, now)
			}
			from := h.Now()
			pc.SleepFor(context.Background(), 5*time.Second)
			if d := h.Now().Sub(from); d < 5*time.Second || d-5*time.Second > time.Microsecond {
				t.Errorf("offset %v drift %v: SleepFor(5s) lasted %v on the clock", c.offset, c.drift, d)
			}
			if v := h.virtualWhen(target); h.toLocal(v.Add(c.offset)).Sub(target).Abs() > time.Microsecond {
				t.Errorf("virtualWhen(%v) = %v is off", target, v)
			}
		})
	}
}
