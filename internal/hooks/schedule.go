package hooks

import (
	"context"
	"time"
)

type legacyKey struct{}

// WithLegacyScheduling returns a context under which Acquire schedules its
// waits as it did before polls were phased and the herd window learnt, so
// that a benchmark can show both side by side: a waiting candidate polls
// PollInterval less a random quarter after its last read, and the herd window
// is sized by ExpectedCandidates alone (never learnt).
func WithLegacyScheduling(ctx context.Context) context.Context { return withFlag(ctx, legacyKey{}) }

// LegacyScheduling reports whether WithLegacyScheduling applies to ctx.
func LegacyScheduling(ctx context.Context) bool { return flag(ctx, legacyKey{}) }

type herdProbeKey struct{}

// WithHerdProbe returns a context under which Acquire calls probe each time
// it draws over the herd window, with the herd it has learnt to expect (the
// number of candidates, itself included, it expects to find the record free
// together) and the window drawn over. Tests use it to watch the window learn.
// probe runs on Acquire's goroutine.
func WithHerdProbe(ctx context.Context, probe func(herd float64, window time.Duration)) context.Context {
	return context.WithValue(ctx, herdProbeKey{}, probe)
}

// HerdProbe returns the probe WithHerdProbe attached to ctx, or nil.
func HerdProbe(ctx context.Context) func(herd float64, window time.Duration) {
	p, _ := ctx.Value(herdProbeKey{}).(func(float64, time.Duration))
	return p
}

type sharedGridKey struct{}

// WithSharedPollGrid returns a context under which Acquire and Watch poll on
// one grid every such poller shares (the poll interval itself, from phase
// zero on the clock) instead of one drawn for each: pollers on clocks that
// agree then read in step for good, the failure the simulation's check for
// polls in step must catch.
func WithSharedPollGrid(ctx context.Context) context.Context { return withFlag(ctx, sharedGridKey{}) }

// SharedPollGrid reports whether WithSharedPollGrid applies to ctx.
func SharedPollGrid(ctx context.Context) bool { return flag(ctx, sharedGridKey{}) }

// withFlag sets the boolean hook key on ctx; flag reports whether it is set.
func withFlag(ctx context.Context, key any) context.Context { return context.WithValue(ctx, key, true) }

func flag(ctx context.Context, key any) bool {
	v, _ := ctx.Value(key).(bool)
	return v
}
