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
			got, warned := firstWriteOffset(t, newDecider(t, c, freshObject(t)), off)
			want := -off // the store's clock minus this host's
			t.Logf("offset bound %v, true offset %v", got, want)
			if got.Low > want || got.High < want {
				t.Errorf("offset bound %v does not contain %v", got, want)
			}
			// A loopback round trip, plus a millisecond each side.
			if width := got.High - got.Low; width > 100*time.Millisecond {
				t.Errorf("offset bound %v is %v wide, want about a round trip", got, width)
			}
			if wantWarn := off != 0; warned != wantWarn {
				t.Errorf("warned %v, want %v", warned, wantWarn)
			}
		})
	}
}

// firstWriteOffset campaigns on d with a clock off from the real one and
// returns the offset bound after the first write, and whether a clock
// warning came with it.
func firstWriteOffset(t *testing.T, d leaderelection.RaceDecider, off time.Duration) (leaderelection.ClockOffset, bool) {
	t.Helper()
	var (
		mu      sync.Mutex
		offsets []leaderelection.ClockOffset // from writes
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
	return offsets[0], warned
}
