package sim

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/racedecider/leaderelection/internal/hooks"
)

// Polls in step. Waiting candidates and watchers on a store that cannot push
// changes each poll on a schedule of their own (phase.go in the engine), so
// that two of them never read together for long: pollers in step would load
// the store in bursts and find a change no sooner than one of them alone.
// Reads do fall together now and then (a stall releases every caught
// goroutine a nanosecond apart, two grids may cross), but two independent
// schedules part within a few polls. Watchers and resolvers also read when
// a term ends, which they all compute from the same record: those reads are
// left out (proc.atTermEnd).

const (
	// stepWindow is how close two reads must be to fall together: far
	// below any poll interval the sim draws, so that independent schedules
	// seldom meet by chance.
	stepWindow = 100 * time.Microsecond
	// stepRun is how many reads in a row of one poller must each fall
	// together with a read of another for the two to be in step: twice the
	// polls one grid lasts (the engine draws a new one every 16 poll
	// intervals), so that no chance meeting of two grids counts, however
	// close their periods.
	stepRun = 32
)

// checkPollsInStep reports every pair of participants of whom one read
// together with the other stepRun times in a row.
func (s *sim) checkPollsInStep() {
	s.mu.Lock()
	procs := slices.Concat(s.procs, s.watchers, s.resolvers)
	s.mu.Unlock()
	reads := map[*proc][]time.Time{}
	for _, p := range procs {
		p.mu.Lock()
		reads[p] = slices.Clone(p.readAts)
		p.mu.Unlock()
	}
	for i, a := range procs {
		for _, b := range procs[i+1:] {
			if n, at := longestInStep(reads[a], reads[b]); n >= stepRun {
				s.violate("polls-in-step", "%s and %s read within %v of each other %d times in a row (from %v)",
					a, b, stepWindow, n, at.Sub(s.start))
			}
		}
	}
}

// longestInStep returns the longest run of reads in a (in order) that each
// fall within stepWindow of a read in b, or the other way round, and where
// it began.
func longestInStep(a, b []time.Time) (int, time.Time) {
	n, at := runInStep(a, b)
	if m, at2 := runInStep(b, a); m > n {
		n, at = m, at2
	}
	return n, at
}

func runInStep(a, b []time.Time) (best int, bestAt time.Time) {
	run, j := 0, 0
	var from time.Time
	for _, t := range a {
		for j < len(b) && b[j].Before(t.Add(-stepWindow)) {
			j++
		}
		if j < len(b) && !b[j].After(t.Add(stepWindow)) {
			if run == 0 {
				from = t
			}
			if run++; run > best {
				best, bestAt = run, from
			}
			continue
		}
		run = 0
	}
	return best, bestAt
}

// engineContext is the context a participant's engine runs under: its
// random choices drawn from r, and the options that change the engine.
func (s *sim) engineContext(r *rand.Rand) context.Context {
	ctx := hooks.WithRand(context.Background(), r)
	if s.opt.SharedPollGrid {
		ctx = hooks.WithSharedPollGrid(ctx)
	}
	return ctx
}
