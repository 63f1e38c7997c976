package leaderelection

import (
	"math"
	"time"
)

// The herd window. Candidates that find the record free at the same moment
// (woken by one push, waking at one takeover time, started together) each
// wait a random while over a window before writing, so that the first
// writer's write usually reaches the others before their own turn comes. The
// window must grow with the number of candidates in such a herd, and nothing
// tells a candidate that number: ExpectedCandidates is only where it starts.
// So each candidate learns it from the herds it takes part in.
//
// What a herd shows a candidate is when its first writer drew: with m
// candidates drawing uniformly over one window W, the first draws at about
// W/(m+1), so a first writer early in the window means a big herd, a late one
// a small herd. A lost race says much less: a candidate loses about as often
// in a herd of 3 as in a herd of 50 that shares its window (what differs is
// how many lose, which no loser sees).
//
// One such sample is noisy (the first of 2 draws over 4 round trips comes
// within an eighth of a round trip about one time in sixteen, as the first of
// 50 nearly always does), and a candidate that learnt a big herd among
// candidates that did not would, if it went by its own window, see an ever
// bigger herd in their early draws. Hence the rules below:
//
//   - Candidates started together (their first read found the record free)
//     take their first sample in full: nothing is known before it, and the
//     first hand-overs of a big cold start should not each cost a crowd of
//     writes (how its first writer is timed: candidate.settle). The next
//     sample counts as much, and in full if it is nearer the floor than the
//     first: a few candidates started together whose first writer drew
//     early (one time in three for 3) learn it was a mistake at their first
//     hand-over.
//   - Otherwise a sample moves the estimate a quarter of the way to what it
//     shows (in logarithms), except that a candidate whose herd is not wide
//     (see below) raises it only when two hand-overs in a row had their
//     first writer within an eighth of a round trip of the window's start,
//     and then in full: a herd too big for its window does that every time,
//     two candidates over 4 round trips one time in 250.
//   - A candidate that is not wide (see below) and loses six herds in a
//     row raises its herd to three times the floor (wide), whatever their
//     timing showed: with 2 drawing, each loses one herd in two, six in a
//     row one time in 64; with 50, nearly always. Timing cannot show a big
//     herd where the news of a write reaches the herd over a spread of
//     delays as long as the window (a server short of cores delivering a
//     change to 50 listeners one after another), and losing can.
//   - A candidate that expects a herd more than twice its floor (wide)
//     yields the floor's window to those that do not (see offset), and learns
//     only from first writers that drew after it.
//
// "Round trip" above is the news delay (candidate.news): how long a write
// takes to reach the others, which on a store that pushes changes can be
// longer than a request's round trip.

// herdMax bounds the learnt herd; the window is bounded by TermLength/2
// anyway.
const herdMax = 256

// herdLosses is how many herds in a row a candidate that is not wide loses
// before it takes its herd for a big one (see herd.lost).
const herdLosses = 6

// herdFloor is the least the learnt herd narrows to without a hint saying
// fewer: two, the candidates that wait while a third leads with the default
// ExpectedCandidates.
const herdFloor = DefaultExpectedCandidates - 1

// The learning rates: the share of the way (in logarithms) a sample moves the
// estimate, and the shares by which hand-overs that give no sample move it
// back to the floor.
const (
	herdGain = 0.25
	// herdYieldGain: a hand-over won in the part of the window a wide
	// candidate yields.
	herdYieldGain = 1.0 / 32
	// herdQuietGain: a hand-over this candidate won without timing (found
	// free by a poll).
	herdQuietGain = 1.0 / 16
)

// herd is what a candidate has learnt of the herds it meets: m is how many
// candidates, itself included, it expects to find the record free together.
// In a hand-over they are all the candidates but the one that released, so m
// starts at ExpectedCandidates - 1.
type herd struct {
	// floor is the least m narrows to: the hint, or herdFloor if that is
	// less.
	floor float64
	m     float64
	// strong is set after a sample whose first writer drew within an
	// eighth of a round trip of the window's start; cold after a sample
	// from candidates started together that raised the herd.
	strong, cold bool
	// losses counts the herds lost in a row while not wide.
	losses int
	// fixed keeps m at the hint (hooks.WithLegacyScheduling).
	fixed bool
}

func newHerd(expected int, fixed bool) herd {
	h := float64(max(expected-1, 0))
	return herd{floor: min(h, herdFloor), m: h, fixed: fixed}
}

// window is the herd window for the store's round trip rtt (its fastest
// recent one). With k others drawing uniformly over a window W, the first
// writer's write reaches them one round trip after it is sent, so about k x
// rtt / W of them write too, and the first write goes out after about W /
// (k+1). W = k x rtt x (1.5 + log2(k)/2) keeps both small: 2 others wait 4
// rtt at most and collide in fewer than half of the hand-overs; 49 others,
// 210 rtt, and about one hand-over in four has a second writer. The window is
// bounded by a share of the term that grows with k (TermLength/16 for k = 2),
// and never exceeds TermLength/2, so that it adds little to a takeover however
// slow the store.
//
// k is the herd m itself, not the m - 1 others: a candidate cannot tell how
// many of the herd are still drawing, and sizing for one more keeps the herd
// of the default ExpectedCandidates (2 waiting while a third leads) at the 4
// round trips that hand over quickly with one failed write in two hand-overs
// or fewer.
func (h *herd) window(rtt, term time.Duration) time.Duration { return herdWindow(h.m, rtt, term) }

func herdWindow(k float64, rtt, term time.Duration) time.Duration {
	if k <= 0 {
		return 0
	}
	// log2 only for k of one or more, where it is not negative (a learnt
	// herd can be a fraction).
	w := time.Duration(float64(rtt) * k * (1.5 + math.Log2(max(k, 1))/2))
	return min(w, time.Duration(k*float64(term)/32), term/2)
}

// wide reports a herd more than twice the floor.
func (h *herd) wide() bool { return !h.fixed && h.floor > 0 && h.m > 2*h.floor }

// offset is where the window starts. A wide candidate yields the floor's
// window to candidates that are not: it draws after it. Those are candidates
// that just started (at the hint) or that only ever met small herds, and they
// draw early; were the wide ones to draw among them, they would see a big
// herd's first writer beat them now and then, and never learn from it (they
// see an early writer either way), so that they would pile up in the early
// part of the window, writing together. With the floor's window left to them,
// one of them elects at once, and the wide herd draws only when none is
// there. It draws a round trip after the floor's window ends, so that the
// write of one that drew at its end reaches the wide herd first. The cost is
// the floor's window and that round trip (5 round trips by default) added to
// a hand-over among a wide herd.
func (h *herd) offset(rtt, term time.Duration) time.Duration {
	if !h.wide() {
		return 0
	}
	return herdWindow(h.floor, rtt, term) + rtt
}

// sawRival takes a timed sample: this candidate drew over a window w wide
// and the herd's first writer drew x into it (see candidate.settle for how x
// is estimated); rtt is the store's round trip. cold marks candidates started
// together.
func (h *herd) sawRival(w, x, rtt time.Duration, cold bool) {
	if h.fixed || w <= 0 {
		return
	}
	// The first of m uniform draws lands on average at w/(m+1), but its
	// logarithm, which the estimate averages, is biased: E[ln(w/x)] is
	// the harmonic number H(m) ~ ln(m) + 0.577. Hence the factor
	// exp(-0.577) = 0.56. A draw at (or, by measuring error, before) the
	// start of the window counts as one at w/(2 herdMax).
	est := 0.56 * float64(w) / max(float64(x), float64(w)/(2*herdMax))
	strong := x < rtt/8
	defer func() { h.strong = strong }()
	switch {
	case cold:
		// In full, but only a first writer within half a round trip of
		// the start raises it (a herd of 3 does that one time in three,
		// 50 nearly always), and a big herd is taken as bigger still,
		// which costs little (the first of many draws comes early in
		// any window) and saves writes when the sample was late.
		if est > h.m && x >= rtt/2 {
			return
		}
		if est > 16 {
			est *= 2
		}
		h.move(est, 1)
	case est > h.m && !h.wide():
		if strong && h.strong {
			h.move(est, 1)
		}
	default:
		g := herdGain
		if h.cold {
			// The second sample of a herd learnt from a start-up: as
			// good as the first, and taken in full when nearer the
			// floor than the first (in logarithms): a few candidates
			// started together whose first writer drew early.
			g = 0.5
			if est*est < h.floor*h.m {
				g = 1
			}
		}
		h.move(est, g)
	}
	h.cold = cold && h.m > h.floor
}

// lost notes a herd this candidate drew in and lost to a rival that drew in
// it too: herdLosses of them in a row, while not wide, raise the herd to
// three times the floor, which is wide (see the rules above).
func (h *herd) lost() {
	if h.fixed || h.wide() {
		h.losses = 0
		return
	}
	h.losses++
	if h.losses >= herdLosses {
		h.losses = 0
		h.move(3*h.floor, 1)
	}
}

// won notes a herd this candidate won: a run of losses ends.
func (h *herd) won() { h.losses = 0 }

// yielded notes a hand-over won in the part of the window this candidate
// yields (see offset): it learns nothing of the herd that draws after it, and
// drifts back towards the floor, slowly, so that a candidate whose herd
// shrank to a few (or that took a few for many) narrows again in the end.
func (h *herd) yielded() {
	if h.fixed {
		return
	}
	h.move(h.floor, herdYieldGain)
}

// lostRace notes that this candidate wrote and lost to a rival's new tenure,
// with no timing to go by: the window may be too narrow.
func (h *herd) lostRace() {
	if h.fixed {
		return
	}
	h.move(max(2*h.m, 1), 0.5)
}

// quiet notes a hand-over this candidate won with no timing to go by: it
// drifts back towards the floor, slowly, as this is weak evidence.
func (h *herd) quiet() {
	if h.fixed {
		return
	}
	h.move(h.floor, herdQuietGain)
}

// move takes a share g of the step from m to est, in logarithms (a herd of
// 50 misjudged as 5 is as wrong as one of 5 misjudged as 50), within
// [floor, herdMax].
func (h *herd) move(est, g float64) {
	est = min(max(est, 1), herdMax)
	m := math.Exp(math.Log(max(h.m, 1)) + g*(math.Log(est)-math.Log(max(h.m, 1))))
	h.m = min(max(m, h.floor), herdMax)
}
