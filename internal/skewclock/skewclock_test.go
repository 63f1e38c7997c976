package skewclock_test

import (
	"testing"
	"testing/synctest"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/internal/skewclock"
)

func TestAbsoluteWaitsMatchNow(t *testing.T) {
	for _, off := range []time.Duration{-time.Hour, 0, 3 * time.Second} {
		synctest.Test(t, func(t *testing.T) {
			c := skewclock.New(clocks.DefaultClock(), off)
			if got := time.Until(c.Now()); got != off {
				t.Fatalf("Now is %v from the inner clock, want %v", got, off)
			}
			target := c.Now().Add(5 * time.Second)
			if got := c.Until(target); got != 5*time.Second {
				t.Errorf("Until = %v, want 5s", got)
			}
			c.SleepUntil(t.Context(), target)
			if got := c.Now(); !got.Equal(target) {
				t.Errorf("SleepUntil woke at %v, want %v", got, target)
			}
			ctx, cancel := c.ContextWithDeadline(t.Context(), c.Now().Add(time.Second))
			defer cancel()
			start := time.Now()
			<-ctx.Done()
			if waited := time.Since(start); waited != time.Second {
				t.Errorf("deadline context ended after %v, want 1s", waited)
			}
		})
	}
}
