// Package backoff spaces out the retries of a loop that talks to a store:
// exponential, with the upper half of each step jittered, so that processes
// that failed together do not retry together. The engine, the gRPC resolver
// and the backends' push channels share it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is one loop's backoff: each wait is half the current step plus a
// random part of the other half, the step starting at Min and doubling up to
// Max (Min when Max is less). The zero step is where it starts and where
// Reset returns it. One goroutine uses it; copying a Backoff copies its step,
// so a Backoff with no step taken serves as the template of others.
type Backoff struct {
	Min, Max time.Duration
	// Jitter, if set, returns a random duration in [0, d] (or [0, d)):
	// a seeded source, so that a simulated run replays. Nil uses
	// math/rand/v2's.
	Jitter func(d time.Duration) time.Duration

	step time.Duration
}

// Next returns the wait before the next retry and doubles the step.
func (b *Backoff) Next() time.Duration {
	if b.step == 0 {
		b.step = b.Min
	} else {
		b.step = min(2*b.step, max(b.Max, b.Min))
	}
	if b.Jitter != nil {
		return b.step/2 + b.Jitter(b.step/2)
	}
	return Spread(b.step)
}

// Spread returns a wait drawn from [d/2, d], from math/rand/v2: a Backoff's
// first step, for a single retry.
func Spread(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }

// Reset starts the next failure from Min again.
func (b *Backoff) Reset() { b.step = 0 }
