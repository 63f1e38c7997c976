// Package hooks gives the repository's own tools (the safety simulation)
// control over engine choices that the public API keeps to itself.
package hooks

import (
	"context"
	"math/rand/v2"
)

type randKey struct{}

// WithRand returns a context under which Acquire draws every random choice
// (jitter, backoff, write ids) from r instead of the process-wide sources,
// so that a seeded run can be replayed. Acquire serialises its use of r; r
// must not be shared with anything else.
func WithRand(ctx context.Context, r *rand.Rand) context.Context {
	return context.WithValue(ctx, randKey{}, r)
}

// Rand returns the source WithRand attached to ctx, or nil.
func Rand(ctx context.Context) *rand.Rand {
	r, _ := ctx.Value(randKey{}).(*rand.Rand)
	return r
}

// ResolverContext, set by package legrpc, makes every resolver that the
// *legrpc.Builder b builds watch under a context with ctx's values (not its
// cancellation): the simulation hands a resolver's watcher its seeded source
// (WithRand) this way. A source must then serve only one Build.
var ResolverContext func(b any, ctx context.Context)
