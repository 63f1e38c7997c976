package leaderelection

import (
	"context"
	"time"

	"github.com/racedecider/leaderelection/internal/hooks"
)

// Polling phases. A waiting candidate on a store that cannot push changes
// finds a release at its next poll, and a watcher finds a new leader at its
// next one. What matters for a hand-over is how soon after the release the
// first of the waiting candidates reads, and that depends on how their polls
// are spread over the poll interval.
//
// Polls counted from each waiter's last read bunch up: candidates that read
// at the same moment (started together, woken by one takeover time, told of
// a release by one push that then failed) poll in step for many intervals,
// and N candidates in step find a release after P/2 on average instead of
// P/(N+1). So each waiter polls on a grid of its own, fixed on the clock
// rather than on its reads: instants phase + k x period since the Unix epoch,
// with phase and period drawn once per waiter (period from a narrow band below
// the poll interval). Whatever synchronises their reads, their next polls fall at
// independent, uniformly spread instants; and as two waiters' periods differ,
// two polls that happen to fall together drift apart within a few intervals
// instead of staying in step.
//
// Independent phases are the best waiters can do without knowing of one
// another: waiting candidates never write, so nothing they can all see tells
// one of the others. The first of N independent, evenly periodic pollers
// reads P/(N+1) after a release on average, and no choice of independent
// phases does better; evenly interleaved polls (P/(2N)) would need each to
// know the others' phases. What the grid removes is the in-step case, which
// is far worse than independent phases.

// pollGrid is one waiter's poll schedule. Its grid (period and phase) is
// drawn anew for each span of gridSpan poll intervals on the clock, from the
// waiter's seed and the span's number: two waiters whose periods happen to be
// almost equal would otherwise stay in step for as long as they wait once a
// common wake-up aligned them, where now they part at the next span at the
// latest. A zero seed gives every waiter the same grid, but for a nudge (see
// hooks.WithSharedPollGrid).
type pollGrid struct {
	seed uint64
	// nudge moves the shared grid (zero seed) by less than a tenth of a
	// millisecond, so that pollers sharing it read in step, but never at
	// the very same instant (an order-free replay needs that).
	nudge time.Duration
}

// gridSpan is how many poll intervals one drawn grid lasts: long enough that
// the hand-over from one grid to the next, which can bring two polls closer
// than a period, costs few reads (about 3 % more), short enough that two
// waiters that fall in step part within that many polls.
const gridSpan = 16

// The bands periods are drawn from, as shares of the poll interval. A waiting
// candidate's polls come up to an eighth early: on one grid a candidate reads
// at most 1.14 times per PollInterval (1.07 on average, about 1.1 with the
// hand-overs between spans' grids), about what the schedule this replaced did
// (its polls came up to a quarter early, each drawn anew), so that no
// candidate reads more often than the cost budget allows. A watcher's come up
// to a sixteenth early (about 6 % more reads than its exact PollInterval,
// hand-overs included). Periods that differ by that much make two waiters'
// polls that fall together drift apart within a few polls.
const (
	candidatePollBand = 1.0 / 8
	watcherPollBand   = 1.0 / 16
)

// sharedPollGrid is the grid every waiter shares under
// hooks.WithSharedPollGrid, nudged by a draw of r.
func sharedPollGrid(r *rng) pollGrid {
	return pollGrid{nudge: time.Duration(r.fraction() * float64(50*time.Microsecond))}
}

// newPollGrid draws a waiter's schedule.
func newPollGrid(r *rng) pollGrid {
	seed := uint64(r.fraction() * (1 << 53))
	return pollGrid{seed: seed | 1}
}

// pollGridFor is the grid a waiter started with ctx polls on: its own, or
// the shared one under hooks.WithSharedPollGrid.
func pollGridFor(ctx context.Context, r *rng) pollGrid {
	g := newPollGrid(r)
	if hooks.SharedPollGrid(ctx) {
		g = sharedPollGrid(r)
	}
	return g
}

// next is the first poll of g strictly after t: on the grid of the span t
// is in, or, once that grid has no poll left in the span, the first of the
// next span's, but never more than interval after t. Polls on one grid are a
// period apart (at most interval, at least interval x (1 - band)); only where
// one span's grid hands over to the next can two come closer, once a span.
func (g pollGrid) next(t time.Time, interval time.Duration, band float64) time.Time {
	if interval <= 0 {
		return t
	}
	span := gridSpan * int64(interval)
	k := floorDiv(t.UnixNano(), span)
	n := g.after(k, t, interval, band)
	if end := time.Unix(0, (k+1)*span); !n.Before(end) {
		n = minTime(g.after(k+1, end.Add(-1), interval, band), t.Add(interval))
	}
	return n
}

// after is the first instant of span k's grid strictly after t.
func (g pollGrid) after(k int64, t time.Time, interval time.Duration, band float64) time.Time {
	if g.seed == 0 {
		return nextPoll(t, interval, g.nudge)
	}
	x := splitmix(g.seed ^ uint64(k)*0x9e3779b97f4a7c15)
	p, f := float64(x>>11)/(1<<53), float64(splitmix(x)>>11)/(1<<53)
	period := interval - time.Duration(p*band*float64(interval))
	return nextPoll(t, period, time.Duration(f*float64(period)))
}

// splitmix is SplitMix64's mixing step: a well-spread hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// floorDiv is a / b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// nextPoll returns the first instant strictly after t of the grid phase + k x
// period, k counting periods since the Unix epoch: a pure function of the
// waiter's period and phase and of t, so that every waiter can compute its
// own schedule (or, given theirs, another's) from the clock alone. It is at
// most period after t. A period of zero or less means no grid: t itself.
func nextPoll(t time.Time, period, phase time.Duration) time.Time {
	if period <= 0 {
		return t
	}
	// Offsets within one period of the epoch-based grid; int64 nanoseconds
	// since 1970 do not overflow until 2262.
	off := (t.UnixNano() - int64(phase)) % int64(period)
	if off < 0 {
		off += int64(period)
	}
	return t.Add(time.Duration(int64(period) - off))
}
