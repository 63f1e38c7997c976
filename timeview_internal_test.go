package leaderelection

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/vimeo/go-clocks/fake"
)

// The TimeView holds the term only while both clocks say so: the stored
// (wall-clock) expiry, and the winning write's send time plus TermLength.
// After a suspend the wall clock jumps and timers do not; after a step back
// the wall clock says the term lasts longer than the monotonic one does.
func TestTimeViewNeedsBothClocks(t *testing.T) {
	clock := fake.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	now := clock.Now()
	for _, tc := range []struct {
		name            string
		expiry, monoEnd time.Time
		want            bool
	}{
		{"both ahead", now.Add(time.Second), now.Add(time.Second), true},
		{"wall passed", now.Add(-time.Second), now.Add(time.Second), false},
		{"monotonic passed", now.Add(time.Second), now.Add(-time.Second), false},
	} {
		tv := newTimeView(clock, tc.expiry, tc.monoEnd, 7)
		if got := tv.ValueInFuture(); got != tc.want {
			t.Errorf("%s: ValueInFuture = %v, want %v (remaining %v)", tc.name, got, tc.want, tv.Remaining())
		}
		if tc.want && tv.Remaining() != time.Second {
			t.Errorf("%s: Remaining = %v, want 1s", tc.name, tv.Remaining())
		}
	}

	// A real clock reading carries a monotonic reading; the stored expiry
	// must not, so that Remaining compares it on the wall clock.
	real := time.Now()
	if s := newTimeView(clock, real, real, 1).v.Load(); s.expiry != s.expiry.Round(0) || s.monoEnd == s.monoEnd.Round(0) {
		t.Error("the stored expiry kept a monotonic reading, or the monotonic end lost it")
	}

	tv := newTimeView(clock, now.Add(time.Second), now.Add(time.Second), 1)
	tv.end()
	if tv.ValueInFuture() {
		t.Error("still valid after end")
	}
}

// scriptClock answers the i-th call of Now with what the test sends on at[i],
// telling entered when a call starts: the test decides how two goroutines'
// clock reads interleave.
type scriptClock struct {
	*fake.Clock
	n       atomic.Int64
	at      [8]chan time.Time
	entered chan int
}

func (c *scriptClock) Now() time.Time {
	i := c.n.Add(1) - 1
	c.entered <- int(i)
	return <-c.at[i]
}

// A term Remaining saw over stays over, even when an extension whose clock
// read came a moment earlier lands between Remaining's load of the term and
// its marking it over. Remaining used to give up when its compare-and-swap
// failed, so that the view was valid again: a Guard that left its drain on
// !ValueInFuture would see the engine release the term (it found it still
// held) while the calls it admitted ran.
func TestTimeViewSeenOverStaysOverAcrossAnExtension(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &scriptClock{Clock: fake.NewClock(base), entered: make(chan int, 8)}
	for i := range c.at {
		c.at[i] = make(chan time.Time, 1)
	}
	expiry := base.Add(time.Second)
	tv := newTimeView(c, expiry, expiry, 1)

	seen := make(chan time.Duration)
	go func() { seen <- tv.Remaining() }()
	<-c.entered // Remaining has loaded the term and reads the clock
	extended := make(chan bool)
	go func() { extended <- tv.extend(expiry.Add(10*time.Second), expiry.Add(10*time.Second)) }()
	<-c.entered
	c.at[1] <- expiry.Add(-time.Nanosecond) // the extension's reading: not over yet
	if !<-extended {
		t.Fatal("the extension, a nanosecond before the expiry, did not take")
	}
	c.at[0] <- expiry // Remaining's reading: over
	left := <-seen
	c.at[2] <- expiry.Add(time.Millisecond)
	go func() { <-c.entered }()
	if after := tv.ValueInFuture(); left > 0 || after {
		t.Errorf("Remaining %v, then ValueInFuture %v a millisecond later: a term seen over was revived by an extension", left, after)
	}
}
