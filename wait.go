package leaderelection

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
)

// waitForChangeUntil waits until until, or until the record identified by tok
// is replaced when n can push changes. It returns the pushed record if one
// came, or quiet = true if n vouches that nothing changed before until. With
// neither (no notifier, or a notifier that failed) the caller must read. Only
// ctx ending is an error.
func waitForChangeUntil(ctx context.Context, clock clocks.Clock, n ChangeNotifier, tok entry.LeaderToken, until time.Time) (pushed *entry.RaceEntry, quiet bool, err error) {
	if n == nil {
		if !clock.SleepUntil(ctx, until) {
			return nil, false, ctx.Err()
		}
		return nil, false, nil
	}
	wctx, cancel := clock.ContextWithDeadline(ctx, until)
	defer cancel()
	rec, err := n.WaitForChange(wctx, tok)
	switch {
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case err == nil:
		return rec, false, nil
	case wctx.Err() != nil:
		return nil, true, nil
	}
	// The notifier failed before the deadline: wait out the rest so that a
	// broken push channel cannot turn into a busy loop, then have the caller
	// read.
	if !clock.SleepUntil(ctx, until) {
		return nil, false, ctx.Err()
	}
	return nil, false, nil
}

// backoff spaces out retries of a failing store: exponential with full
// jitter, so that candidates that failed together do not retry together.
type backoff struct {
	min, max, cur time.Duration
	rng           *rng
}

func newBackoff(r *rng, min, max time.Duration) backoff {
	if max < min {
		max = min
	}
	return backoff{min: min, max: max, rng: r}
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur/2 + b.rng.jitter(b.cur/2)
}

// rng makes the engine's random choices. A nil *rng uses the process-wide
// sources; the simulation gives each candidate a seeded one (internal/hooks)
// so that a run can be replayed.
type rng struct {
	mu sync.Mutex
	r  *mrand.Rand
}

func newRNG(r *mrand.Rand) *rng {
	if r == nil {
		return nil
	}
	return &rng{r: r}
}

// jitter returns a random duration in [0, d).
func (g *rng) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if g == nil {
		return mrand.N(d)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Duration(g.r.Int64N(int64(d)))
}

// writeID returns a random id that tells one write attempt from another.
func (g *rng) writeID() string {
	var b [12]byte
	if g == nil {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	} else {
		g.mu.Lock()
		for i := range b {
			b[i] = byte(g.r.Uint32())
		}
		g.mu.Unlock()
	}
	return hex.EncodeToString(b[:])
}

// isRaceLost reports whether err is a lost race rather than an outcome that
// might have been a success.
func isRaceLost(err error) bool { return errors.Is(err, entry.ErrRaceLost) }

// rttTracker estimates the store's round trip as the shortest of the last
// few, so that one slow call (a retry, a connection set-up) does not widen
// the herd window.
type rttTracker struct {
	samples [8]time.Duration
	n       int
}

func (t *rttTracker) add(d time.Duration) {
	t.samples[t.n%len(t.samples)] = max(d, 0)
	t.n++
}

func (t *rttTracker) estimate() time.Duration {
	if t.n == 0 {
		return 0
	}
	return slices.Min(t.samples[:min(t.n, len(t.samples))])
}
