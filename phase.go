package leaderelection

import "time"

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

// pollGrid is one waiter's poll schedule, as shares so that it follows the
// poll interval when that changes: the period is the interval less a share
// of a band below it, the phase a share of the period.
type pollGrid struct {
	period, phase float64 // in [0, 1)
}

// The bands periods are drawn from, as shares of the poll interval. A waiting
// candidate's polls come up to an eighth early: a candidate reads at most
// 1.14 times per PollInterval (1.07 on average), which is what the schedule
// this replaced did on average (its polls came up to a quarter early, each
// drawn anew), so that no candidate reads more often than the cost budget
// allows. A watcher's come up to a sixteenth early, 3% more reads than its
// exact PollInterval. Periods that differ by that much make two waiters'
// polls that fall together drift apart within a few polls.
const (
	candidatePollBand = 1.0 / 8
	watcherPollBand   = 1.0 / 16
)

// newPollGrid draws a waiter's schedule.
func newPollGrid(r *rng) pollGrid { return pollGrid{period: r.fraction(), phase: r.fraction()} }

// next is the first poll of g strictly after t, for polls at most interval
// apart and at least interval x (1 - band).
func (g pollGrid) next(t time.Time, interval time.Duration, band float64) time.Time {
	period := interval - time.Duration(g.period*band*float64(interval))
	return nextPoll(t, period, time.Duration(g.phase*float64(period)))
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
