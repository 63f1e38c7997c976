package leaderelection

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vimeo/go-clocks/fake"

	"github.com/racedecider/leaderelection/entry"
)

// countingDecider accepts every write and counts them. (The memory backend
// imports this package, so internal tests cannot use it.)
type countingDecider struct{ writes int }

func (c *countingDecider) WriteEntry(context.Context, *entry.RaceEntry) (entry.LeaderToken, error) {
	c.writes++
	return entry.LeaderToken{Version: "1"}, nil
}

func (c *countingDecider) ReadCurrent(context.Context) (*entry.RaceEntry, error) {
	return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
}

// A write whose caller has stopped, or whose deadline (the term it serves)
// has passed, is not sent: it could only leave an outcome to resolve. A
// process resumed from a pause reaches this with both.
func TestWriteNotSentWhenTooLate(t *testing.T) {
	d := &countingDecider{}
	c := Config{Decider: d, LeaderID: "a", TermLength: time.Second, OnElected: func(context.Context, *TimeView) {}}
	cd := &candidate{Config: c.withDefaults()}
	now := cd.Clock.Now()
	rec := &entry.RaceEntry{ElectionNumber: 0, Term: 0, LeaderID: "a", TermExpiry: now.Add(time.Second), WriteID: "w"}

	if _, _, err := cd.write(context.Background(), rec, now.Add(-time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline passed: err = %v, want DeadlineExceeded", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := cd.write(ctx, rec, now.Add(time.Minute)); !errors.Is(err, context.Canceled) {
		t.Errorf("context ended: err = %v, want Canceled", err)
	}
	if d.writes != 0 || len(cd.pending) != 0 {
		t.Errorf("%d writes sent, %d pending; want none", d.writes, len(cd.pending))
	}
	if _, mine, err := cd.write(context.Background(), rec, now.Add(time.Minute)); err != nil || !mine || d.writes != 1 {
		t.Errorf("in time: mine = %v, err = %v, %d writes; want a write that is ours", mine, err, d.writes)
	}
}

// The herd window grows with the expected number of candidates and with the
// store's round trip (the shortest of the last 8), within a share of the term:
// slots of 4/3 round trips (see slotWidth), as many as the legacy window
// held round trips, less 2 (herdSlots).
func TestHerdJitter(t *testing.T) {
	const term = 2 * time.Second
	for _, tc := range []struct {
		candidates int
		rtts       []time.Duration
		want       time.Duration
	}{
		{0, []time.Duration{5 * time.Millisecond}, 13333 * time.Microsecond}, // default 3: 2 slots
		{3, nil, 0}, // no round trip measured yet
		{1, []time.Duration{5 * time.Millisecond}, 0},                                                            // alone
		{2, []time.Duration{3 * time.Millisecond}, 4 * time.Millisecond},                                         // one other: 1 slot
		{3, []time.Duration{time.Second}, term / 16},                                                             // slow store: the cap
		{3, []time.Duration{time.Second, 5 * time.Millisecond, 90 * time.Millisecond}, 13333 * time.Microsecond}, // the shortest
		{9, []time.Duration{time.Millisecond}, 29333 * time.Microsecond},                                         // 8 x 3 - 2 = 22 slots
		{50, []time.Duration{5 * time.Millisecond}, term / 2},                                                    // 209 slots of 6.7 ms is over the cap
		{50, []time.Duration{time.Millisecond}, 278700 * time.Microsecond},                                       // 49 x 4.31 - 2 slots (rounded below)
	} {
		c := Config{Decider: &countingDecider{}, LeaderID: "a", TermLength: term, ExpectedCandidates: tc.candidates,
			OnElected: func(context.Context, *TimeView) {}}
		cd := &candidate{Config: c.withDefaults()}
		for _, d := range tc.rtts {
			cd.rtt.add(d)
		}
		got := cd.herdJitter()
		if got < tc.want-tc.want/1000 || got > tc.want+tc.want/50 {
			t.Errorf("ExpectedCandidates %d, round trips %v: window %v, want %v", tc.candidates, tc.rtts, got, tc.want)
		}
	}
}

// A candidate times the news of writes by the records pushed to it: how long
// after its writer sent each it arrived (the shortest of the last 8). Where
// that is longer than the round trip (a push that goes through a read), it
// sizes the herd window. A record sent before the wait began (the wait's
// token was stale) is no sample, and a clock behind the writers' makes the
// delay 4 round trips at most.
func TestNewsDelay(t *testing.T) {
	const term = 2 * time.Second
	clock := fake.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := Config{Decider: &countingDecider{}, LeaderID: "a", TermLength: term, Clock: clock,
		OnElected: func(context.Context, *TimeView) {}}
	cd := &candidate{Config: c.withDefaults()}
	cd.rtt.add(5 * time.Millisecond)
	if got := cd.news(); got != 5*time.Millisecond {
		t.Fatalf("news %v with no push yet, want the round trip, 5ms", got)
	}
	began := clock.Now()
	clock.Advance(time.Second)
	// sent returns a record its writer sent ago: an extension asks for a
	// TermLength from then, a release expires then.
	sent := func(ago time.Duration, released bool) *entry.RaceEntry {
		at := clock.Now().Add(-ago)
		if !released {
			at = at.Add(term)
		}
		return &entry.RaceEntry{ElectionNumber: 7, Term: 7, Released: released, TermExpiry: at}
	}
	cd.pushed(sent(8*time.Millisecond, false), began)
	cd.pushed(sent(7*time.Millisecond, true), began)
	cd.pushed(sent(9*time.Millisecond, false), began)
	cd.pushed(sent(2*time.Second, false), began) // sent before the wait
	if got := cd.news(); got != 7*time.Millisecond {
		t.Errorf("news %v after pushes 8, 7 and 9ms after they were sent, want 7ms", got)
	}
	if w, want := cd.herdJitter(), 2*slotWidth(7*time.Millisecond); w != want {
		t.Errorf("herd window %v, want the default's 2 slots for a news delay of 7ms, %v", w, want)
	}
	for range 8 {
		cd.pushed(sent(time.Second, false), began) // a writer whose clock is behind
	}
	if got := cd.news(); got != 20*time.Millisecond {
		t.Errorf("news %v after pushes a second late, want 4 round trips, 20ms", got)
	}
}

// Slotted draws: a draw's write falls in the first quarter of its slot, so
// that writes from different slots are at least a news delay apart (the
// earlier one reaches the later one's candidate in time), and a write seen
// anywhere up to the middle of the gap that follows is taken back to the
// draw it came from.
func TestSlots(t *testing.T) {
	const d = 6 * time.Millisecond
	s := slotWidth(d)
	if s != 8*time.Millisecond {
		t.Fatalf("slot %v for a news delay of %v, want 8ms", s, d)
	}
	for y := time.Duration(0); y < 4*s; y += s/64 + 7*time.Microsecond {
		at := slotDelay(y, s)
		if at < y/s*s || at >= y/s*s+s/4 {
			t.Errorf("a draw at %v writes at %v, outside the first quarter of its slot", y, at)
		}
		if next := slotDelay((y/s+1)*s, s); next-at < d {
			t.Errorf("a draw at %v writes at %v, the next slot's first at %v: less than %v apart", y, at, next, d)
		}
		for _, late := range []time.Duration{0, s / 8, 3 * s / 8} {
			got := slotPosition(at+late, s)
			if got/s != y/s {
				t.Errorf("a write seen %v late at %v taken for slot %d, want %d", late, at+late, got/s, y/s)
			}
			if late == 0 && (got < y-4 || got > y+4) {
				t.Errorf("a write at %v taken for a draw at %v, want %v", at, got, y)
			}
		}
	}
	// A wide candidate on a store that answers at once (no news delay:
	// an empty window) starts at the takeover time, never before it: a
	// candidate that woke before the takeover time would wake there
	// again and again without time passing.
	h := herd{floor: 2, m: 10}
	if off := h.offset(0, time.Second); off < 0 {
		t.Errorf("a wide herd's window starts %v after the takeover time with no news delay", off)
	}
	if slotDelay(5*time.Millisecond, 0) != 5*time.Millisecond || slotPosition(5*time.Millisecond, 0) != 5*time.Millisecond {
		t.Errorf("without slots, draws are their own delays")
	}
}

func TestLatenciesForgetOldSamples(t *testing.T) {
	var r latencies
	r.add(time.Millisecond)
	r.add(50 * time.Millisecond)
	for range 7 {
		r.add(10 * time.Millisecond)
	}
	if got := r.fastest(); got != 10*time.Millisecond {
		t.Errorf("fastest %v after 8 newer samples of 10ms or more, want 10ms", got)
	}
	if got := r.slowest(); got != 50*time.Millisecond {
		t.Errorf("slowest %v, want the 50ms among the last 8", got)
	}
}

// With many candidates, the default poll interval grows, so that a release is
// still found quickly (one of N finds it after about PollInterval/N) while
// two rarely find it within one round trip.
func TestDefaultPollInterval(t *testing.T) {
	for _, tc := range []struct {
		candidates int
		want       time.Duration
	}{{0, time.Second / 2}, {16, time.Second / 2}, {50, 50 * 2 * time.Second / 64}} {
		c := Config{TermLength: 2 * time.Second, ExpectedCandidates: tc.candidates}
		if got := c.withDefaults().PollInterval; got != tc.want {
			t.Errorf("ExpectedCandidates %d: PollInterval %v, want %v", tc.candidates, got, tc.want)
		}
	}
}
