package gcs_test

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

// TestClockOffsetFromCommitTimes campaigns with clocks set off the
// emulator's (which stamps objects with its host's clock, this host's) and
// checks that the bound from the first write's "updated" time contains the
// true offset, to the millisecond GCS reports, and warns past MaxClockSkew/4.
func TestClockOffsetFromCommitTimes(t *testing.T) {
	emu := newEmulator(t)
	c := newClient(t, emu.addr)
	for _, off := range []time.Duration{-3 * time.Second, 0, 1500 * time.Millisecond} {
		t.Run(off.String(), func(t *testing.T) {
			got, rtt, warned := firstWriteOffset(t, newDecider(t, c, freshObject(t)), off)
			want := -off // the store's clock minus this host's
			t.Logf("offset bound %v, true offset %v", got, want)
			if got.Low > want || got.High < want {
				t.Errorf("offset bound %v does not contain %v", got, want)
			}
			// The write's round trip, plus 3 ms for GCS's precision.
			if width := got.High - got.Low; width > rtt+4*time.Millisecond {
				t.Errorf("offset bound %v is %v wide, want at most the round trip %v + 3 ms (+1 ms: the wall and monotonic clocks measure it apart)", got, width, rtt)
			}
			if wantWarn := off != 0; warned != wantWarn {
				t.Errorf("warned %v, want %v", warned, wantWarn)
			}
		})
	}
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
