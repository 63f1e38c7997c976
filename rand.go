package leaderelection

import (
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/racedecider/leaderelection/internal/backoff"
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

// newBackoff is the backoff every loop that talks to a store waits on (see
// internal/backoff), drawing from r so that a simulated run replays.
func newBackoff(r *rng, min, max time.Duration) backoff.Backoff {
	return backoff.Backoff{Min: min, Max: max, Jitter: r.jitter}
}
