package racedecidertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clocks "github.com/vimeo/go-clocks"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/skewclock"
)

// FirstWriteOffset checks a backend's commit times the way the engine's
// clock check reads them: it campaigns on d with a clock off from the real
// one by off (TermLength 20 s, MaxClockSkew 4 s, so the engine warns past
// 1 s) and returns the offset bound after the first write, that write's
// round trip, and whether a clock warning came with it. The true offset of
// the store's clock from the skewed one is -off plus the store's own error.
func FirstWriteOffset(t *testing.T, d leaderelection.RaceDecider, off time.Duration) (leaderelection.ClockOffset, time.Duration, bool) {
	t.Helper()
	var (
		mu      sync.Mutex
		offsets []leaderelection.ClockOffset // from writes
		rtts    []time.Duration              // of successful writes
		warned  bool
		once    sync.Once
	)
	wrote := make(chan struct{})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- leaderelection.Config{
			Decider:      d,
			LeaderID:     "skewed",
			TermLength:   20 * time.Second,
			MaxClockSkew: 4 * time.Second,
			Clock:        skewclock.New(clocks.DefaultClock(), off),
			Observer: leaderelection.ObserverFunc(func(e leaderelection.Event) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case e.Kind == leaderelection.EventStoreRequest && e.Op == leaderelection.OpWrite && e.Result == leaderelection.ResultOK:
					rtts = append(rtts, e.Latency)
				case e.Kind == leaderelection.EventClockWarning:
					warned = true
				case e.Kind == leaderelection.EventClockOffset && e.Offset.HighKnown:
					offsets = append(offsets, e.Offset)
					once.Do(func() { close(wrote) })
				}
			}),
			OnElected: func(ctx context.Context, _ *leaderelection.TimeView) { <-ctx.Done() },
		}.Acquire(ctx)
	}()
	select {
	case <-wrote:
	case err := <-done:
		t.Fatalf("Acquire returned %v before its first write was measured", err)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return offsets[0], rtts[0], warned
}
