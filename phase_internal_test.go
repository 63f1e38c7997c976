package leaderelection

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// nextPoll is the first instant of the grid phase + k x period strictly after
// t, and so at most a period after it, whatever t.
func TestNextPollIsOnTheGrid(t *testing.T) {
	const period, phase = 437 * time.Millisecond, 123 * time.Millisecond
	base := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	onGrid := func(x time.Time) bool { return (x.UnixNano()-int64(phase))%int64(period) == 0 }
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		t0 := base.Add(time.Duration(r.Int64N(int64(time.Hour))))
		got := nextPoll(t0, period, phase)
		if !got.After(t0) || got.Sub(t0) > period || !onGrid(got) {
			t.Fatalf("nextPoll(%v) = %v: want on the grid, after it, at most %v later", t0, got, period)
		}
		if again := nextPoll(got, period, phase); again.Sub(got) != period {
			t.Fatalf("from a grid instant %v the next is %v, want a period later", got, again)
		}
	}
	// Before 1970 too (negative Unix times).
	old := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := nextPoll(old, period, phase); !got.After(old) || got.Sub(old) > period || !onGrid(got) {
		t.Errorf("nextPoll(%v) = %v", old, got)
	}
	if got := nextPoll(base, 0, 0); !got.Equal(base) {
		t.Errorf("no grid: nextPoll = %v, want t itself", got)
	}
}

// Two waiters whose polls fall together once drift apart: their periods
// differ, so a coincidence lasts a few polls at most, and the grids are drawn
// anew every gridSpan intervals, so that even two almost equal periods part.
// Candidates that read at the same moment (a common wake-up) poll at
// independent instants next. Polls are at most an interval apart, and closer
// than a grid's shortest period only where one span's grid hands over to the
// next.
func TestPollGridsDoNotStayInStep(t *testing.T) {
	const interval = 500 * time.Millisecond
	r := newRNG(rand.New(rand.NewPCG(3, 4)))
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n, polls = 200, 4 * gridSpan
	grids := make([]pollGrid, n)
	at := make([][]time.Time, n)
	for i := range grids {
		grids[i] = newPollGrid(r)
		t0 := base // every one read at base: a common wake-up
		for range polls {
			t0 = grids[i].next(t0, interval, candidatePollBand)
			at[i] = append(at[i], t0)
		}
	}
	longest := 0
	for i := range n {
		short := 0
		for k := 1; k < polls; k++ {
			gap := at[i][k].Sub(at[i][k-1])
			if gap > interval || gap <= 0 {
				t.Fatalf("waiter %d: polls %v apart, want at most %v", i, gap, interval)
			}
			if gap < interval-interval/8 {
				short++
			}
		}
		if spans := polls/gridSpan + 1; short > spans {
			t.Errorf("waiter %d: %d gaps shorter than a grid's period in %d spans, want one a span at most", i, short, spans)
		}
		for j := range i {
			// "In step": polls within a millisecond, several times in a
			// row. Among this many pairs some grids fall together by
			// chance for a few polls, but none for longer than a span.
			run := 0
			for _, a := range at[i] {
				k, _ := slices.BinarySearchFunc(at[j], a.Add(-time.Millisecond), time.Time.Compare)
				if k == len(at[j]) || at[j][k].Sub(a) >= time.Millisecond {
					run = 0
					continue
				}
				if run++; run > longest {
					longest = run
				}
			}
		}
	}
	t.Logf("longest run of polls in step among %d waiters: %d", n, longest)
	if longest > gridSpan+2 {
		t.Errorf("two waiters polled within a millisecond of each other %d times in a row: their grids did not part at a span's end", longest)
	}
	// After the common read, first polls spread over the interval.
	var first []time.Duration
	for i := range n {
		first = append(first, at[i][0].Sub(base))
	}
	distinct := map[time.Duration]bool{}
	for _, f := range first {
		distinct[f.Round(10*time.Microsecond)] = true
	}
	if len(distinct) < n-2 {
		t.Errorf("first polls after a common read: %v, want them spread", first)
	}
}

// The herd estimate: the first of the window's draws, early in the window,
// shows a big herd; late, a small one.
func TestHerdLearnsFromTheFirstDraw(t *testing.T) {
	const rtt, term = 5 * time.Millisecond, 2 * time.Second
	r := rand.New(rand.NewPCG(5, 6))
	// n candidates drawing over h's window: when the first drew.
	first := func(h *herd, n int) time.Duration {
		w := h.window(rtt, term)
		x := w
		for range n {
			x = min(x, time.Duration(r.Int64N(int64(w))))
		}
		return x
	}
	t.Run("fifty started together", func(t *testing.T) {
		h := newHerd(DefaultExpectedCandidates, false)
		h.sawRival(h.window(rtt, term), first(&h, 50), rtt, true)
		if h.m < 16 || !h.wide() {
			t.Errorf("learnt a herd of %.1f from a start-up among 50", h.m)
		}
		for range 8 {
			h.sawRival(h.window(rtt, term), first(&h, 50), rtt, false)
		}
		if h.m < 16 {
			t.Errorf("a herd of %.1f after 8 hand-overs among 50", h.m)
		}
	})
	t.Run("two waiting", func(t *testing.T) {
		h := newHerd(DefaultExpectedCandidates, false)
		wide := 0
		for range 400 {
			h.sawRival(h.window(rtt, term), first(&h, 2), rtt, false)
			if h.m > 3 {
				wide++
			}
		}
		if wide > 20 {
			t.Errorf("2 waiting: a herd over 3 expected after %d of 400 hand-overs", wide)
		}
	})
	t.Run("narrows back", func(t *testing.T) {
		h := newHerd(DefaultExpectedCandidates, false)
		h.sawRival(h.window(rtt, term), first(&h, 50), rtt, true)
		for range 20 {
			h.sawRival(h.window(rtt, term), first(&h, 2), rtt, false)
		}
		if h.m > 3 || h.wide() {
			t.Errorf("a herd of %.1f after 20 hand-overs among 2", h.m)
		}
	})
	t.Run("a mistaken start-up, then hand-overs won early by others", func(t *testing.T) {
		h := newHerd(DefaultExpectedCandidates, false)
		h.sawRival(h.window(rtt, term), rtt/16, rtt, true) // as if among many
		if !h.wide() {
			t.Fatalf("herd %.1f", h.m)
		}
		for range 200 {
			h.yielded()
		}
		if h.wide() {
			t.Errorf("still a herd of %.1f after 200 hand-overs won in the part it yields", h.m)
		}
	})
	t.Run("losses in a row", func(t *testing.T) {
		h := newHerd(DefaultExpectedCandidates, false)
		for range herdLosses - 1 {
			h.lost()
		}
		h.won()
		for range herdLosses - 1 {
			h.lost()
		}
		if h.m != DefaultExpectedCandidates-1 {
			t.Fatalf("a herd of %.1f after %d losses, a win, and %d losses", h.m, herdLosses-1, herdLosses-1)
		}
		h.lost()
		if !h.wide() {
			t.Fatalf("a herd of %.1f after %d losses in a row, want it wide", h.m, herdLosses)
		}
		m := h.m
		for range 2 * herdLosses {
			h.lost()
		}
		if h.m != m {
			t.Errorf("a wide herd of %.1f moved to %.1f by losses (wide candidates learn by timing)", m, h.m)
		}
	})
	t.Run("legacy", func(t *testing.T) {
		h := newHerd(DefaultExpectedCandidates, true)
		h.sawRival(h.window(rtt, term), 0, rtt, true)
		h.lostRace()
		h.yielded()
		h.quiet()
		for range 2 * herdLosses {
			h.lost()
		}
		if h.m != DefaultExpectedCandidates-1 || h.offset(rtt, term) != 0 {
			t.Errorf("fixed herd moved to %.1f", h.m)
		}
	})
}
