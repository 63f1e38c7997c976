package leaderelection

import (
	"context"
	"errors"
	"fmt"
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

// A write whose outcome was unknown is kept while it may still apply and
// matter: one sent two terms ago can only give a term already over, and is
// forgotten, so that a store whose writes keep timing out does not make the
// list of pending writes grow for ever.
func TestPendingWritesAreForgottenOnceTheirTermIsOver(t *testing.T) {
	const term = time.Second
	clock := fake.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := Config{Decider: &countingDecider{}, LeaderID: "a", TermLength: term, Clock: clock,
		OnElected: func(context.Context, *TimeView) {}}
	cd := &candidate{Config: c.withDefaults()}
	tok := entry.LeaderToken{Version: "7"}
	for i := range 100 {
		cd.pending = append(cd.pending, pendingWrite{writeID: fmt.Sprint(i), on: tok, sentAt: clock.Now()})
		clock.Advance(term / 10)
	}
	cd.observe(context.Background(), &entry.RaceEntry{ElectionNumber: 3, Term: 3, LeaderID: "b", TermExpiry: clock.Now(), Token: tok})
	if n := len(cd.pending); n != 19 {
		t.Errorf("%d pending writes kept of 100 sent a tenth of a term apart, want the 19 sent less than 2 terms ago", n)
	}
}

// An extension that waits for the store's write interval (WriteSpacer) asks
// for a term from when it is sent, after the wait: the stored expiry and the
// TimeView's monotonic end (the send time plus TermLength) must be the same
// instant, or the monotonic guard would outlast the term by the wait.
func TestExtensionAfterASpacerWaitCountsFromTheSend(t *testing.T) {
	const term, spacing = 4 * time.Second, time.Second
	clock := fake.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := Config{Decider: &countingDecider{}, LeaderID: "a", TermLength: term, Clock: clock,
		OnElected: func(context.Context, *TimeView) {}}
	cd := &candidate{Config: c.withDefaults()}
	cd.spacing = spacing
	tok := entry.LeaderToken{Version: "1"}
	cd.noteVersion(tok, clock.Now()) // the write that won the term, just now
	now := clock.Now()
	next := &entry.RaceEntry{ElectionNumber: 1, Term: 0, LeaderID: "a", TermExpiry: now.Add(term), Token: tok}

	type result struct {
		stored *entry.RaceEntry
		mine   bool
		err    error
	}
	done := make(chan result, 1)
	go func() {
		stored, mine, err := cd.write(context.Background(), next, now.Add(term))
		done <- result{stored, mine, err}
	}()
	clock.AwaitSleepers(1)
	clock.Advance(spacing)
	r := <-done
	if r.err != nil || !r.mine {
		t.Fatalf("write after the interval: mine = %v, err = %v", r.mine, r.err)
	}
	if want := now.Add(spacing + term); !r.stored.TermExpiry.Equal(want) || !cd.sentAt.Add(term).Equal(want) {
		t.Errorf("stored expiry %v, send time + TermLength %v; want both %v (a term from the send, after the wait)",
			r.stored.TermExpiry, cd.sentAt.Add(term), want)
	}
}

// The herd window grows with the expected number of candidates and with the
// store's round trip (the shortest of the last 8), within a share of the term.
func TestHerdJitter(t *testing.T) {
	const term = 2 * time.Second
	for _, tc := range []struct {
		candidates int
		rtts       []time.Duration
		want       time.Duration
	}{
		{0, []time.Duration{5 * time.Millisecond}, 20 * time.Millisecond}, // default 3: 2 others x 2 rtt
		{3, nil, 0}, // no round trip measured yet
		{1, []time.Duration{5 * time.Millisecond}, 0},                                                         // alone
		{3, []time.Duration{time.Second}, term / 16},                                                          // slow store: the cap
		{3, []time.Duration{time.Second, 5 * time.Millisecond, 90 * time.Millisecond}, 20 * time.Millisecond}, // the shortest
		{9, []time.Duration{time.Millisecond}, 24 * time.Millisecond},                                         // 8 others x 3 rtt
		{50, []time.Duration{5 * time.Millisecond}, term / 2},                                                 // 49 x 4.3 x 5 ms is over the cap
		{50, []time.Duration{time.Millisecond}, 210 * time.Millisecond},                                       // 49 x 4.31 rtt (rounded below)
	} {
		c := Config{Decider: &countingDecider{}, LeaderID: "a", TermLength: term, ExpectedCandidates: tc.candidates,
			OnElected: func(context.Context, *TimeView) {}}
		cd := &candidate{Config: c.withDefaults()}
		for _, d := range tc.rtts {
			cd.rtt.add(d)
		}
		got := cd.herdJitter()
		if got < tc.want || got > tc.want+tc.want/50 {
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
	if got := cd.news(); got != 7500*time.Microsecond {
		t.Errorf("news %v after pushes 8, 7 and 9ms after they were sent, want their typical delay (the mean but the slowest), 7.5ms", got)
	}
	if w := cd.herdJitter(); w != 30*time.Millisecond {
		t.Errorf("herd window %v, want the default's 4 x the news delay, 30ms", w)
	}
	for range 8 {
		cd.pushed(sent(time.Second, false), began) // a writer whose clock is behind
	}
	if got := cd.news(); got != 20*time.Millisecond {
		t.Errorf("news %v after pushes a second late, want 4 round trips, 20ms", got)
	}
	// The same writer's pushes reaching this candidate 0 to 6 ms apart, and
	// one 500 ms late (a reconnection): the spread counts in full, on top
	// of the 4 round trips, and the one late push not at all.
	clock.Advance(time.Second)
	for i := range 7 {
		cd.pushed(sent(time.Second+time.Duration(i)*time.Millisecond, false), began)
	}
	cd.pushed(sent(1500*time.Millisecond, false), began)
	if got := cd.news(); got != 23*time.Millisecond {
		t.Errorf("news %v after pushes a second and 0 to 6ms late, and one 1.5 s late, want 4 round trips and the 3ms the typical push takes more than the fastest, 23ms", got)
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
