package leaderelection

import (
	"context"
	"errors"
	"testing"
	"time"

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
