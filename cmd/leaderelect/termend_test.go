package main

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	clocks "github.com/vimeo/go-clocks"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/skewclock"
	"github.com/racedecider/leaderelection/memory"
)

// TestStopTimesFollowWhatIsLeft: COMMAND is stopped by what is left of the
// term, not by the expiry on the wall clock (TimeView.Get), which is late by
// as much as the wall clock was stepped back since the term began. Here the
// engine's clock reads an hour ahead of time.Now, as if this process's wall
// clock had just been stepped back an hour.
func TestStopTimesFollowWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const term = 8 * time.Second
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		elected := make(chan *leaderelection.TimeView, 1)
		done := make(chan error, 1)
		go func() {
			done <- leaderelection.Config{
				Decider: memory.NewDecider(), LeaderID: "a", TermLength: term, MaxClockSkew: time.Second,
				Clock: skewclock.New(clocks.DefaultClock(), time.Hour),
				OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
					elected <- tv
					<-ctx.Done()
				},
			}.Acquire(ctx)
		}()
		tv := <-elected
		r := &runner{term: term, grace: time.Second}
		now := time.Now()
		if end := termEnd(tv); end.After(now.Add(term)) || end.Before(now) {
			t.Errorf("the term ends %v from now, want at most %v (TimeView.Get is %v from now)", end.Sub(now), term, tv.Get().Sub(now))
		}
		if at := r.stopAt(termEnd(tv)); at.After(now.Add(term)) || at.Before(now) {
			t.Errorf("COMMAND is stopped %v from now, want within the term's %v", at.Sub(now), term)
		}
		cancel()
		<-done
	})
}
