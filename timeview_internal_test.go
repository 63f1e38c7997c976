package leaderelection

import (
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
