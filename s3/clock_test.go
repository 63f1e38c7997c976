package s3_test

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

// TestClockOffsetFromCommitTimes campaigns with clocks set off the store's
// (on this host, so that the true offset is known) and checks that the
// bound from the first write's Date header contains the true offset, to the
// second S3 reports, and warns past MaxClockSkew/4.
func TestClockOffsetFromCommitTimes(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		c := s.client(t, "")
		for _, off := range []time.Duration{-5 * time.Second, 0, 4500 * time.Millisecond} {
			t.Run(off.String(), func(t *testing.T) {
				d, _ := s.decider(t, c)
				got, rtt, warned := firstWriteOffset(t, d, off)
				want := -off // the store's clock minus this host's
				t.Logf("offset bound %v, true offset %v", got, want)
				if got.Low > want || got.High < want {
					t.Errorf("offset bound %v does not contain %v", got, want)
				}
				// Whole seconds, perhaps from a cached Date: a second
				// below, two above, plus a round trip.
				if width := got.High - got.Low; width > rtt+3*time.Second+time.Millisecond {
					t.Errorf("offset bound %v is %v wide, want at most the round trip %v + 3 s (+1 ms: the wall and monotonic clocks measure it apart)", got, width, rtt)
				}
				// Past 1 s even after the widening.
				if wantWarn := off != 0; warned != wantWarn {
					t.Errorf("warned %v, want %v", warned, wantWarn)
				}
			})
		}
	})
}

// firstWriteOffset campaigns on d with a clock off from the real one and
// returns the offset bound after the first write, that write's round trip,
// and whether a clock warning came with it.
func firstWriteOffset(t *testing.T, d leaderelection.RaceDecider, off time.Duration) (leaderelection.ClockOffset, time.Duration, bool) {
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
			MaxClockSkew: 4 * time.Second, // warns past 1 s
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
	<-wrote
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return offsets[0], rtts[0], warned
}
