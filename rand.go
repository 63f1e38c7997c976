package leaderelection

import (
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"sync"
	"time"
)

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

// fraction returns a random number in [0, 1).
func (g *rng) fraction() float64 {
	if g == nil {
		return mrand.Float64()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.Float64()
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

// backoff spaces out retries of a failing store: exponential with full
// jitter, so that candidates that failed together do not retry together.
// Every loop that talks to a store waits on one.
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

// next returns the wait before the next retry: half the current step plus a
// random part of the other half, the step doubling up to max.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur/2 + b.rng.jitter(b.cur/2)
}

// reset starts the next failure from min again.
func (b *backoff) reset() { b.cur = 0 }
