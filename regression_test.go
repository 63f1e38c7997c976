package leaderelection_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
)

// These reproduce engine bugs found by the safety simulation (internal/sim).

// An acquisition that was applied but reported failed, and could not be read
// back before its term ran out: the candidate later finds that the expired
// record is its own. It must campaign on, not re-adopt that record in a loop.
func TestExpiredOwnWriteDoesNotLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &faultyDecider{RaceDecider: memory.NewDecider()}
		f.opLimit.Store(10_000)
		f.applyThenFail.Store(1)
		f.afterWrite = func() {
			if f.writes.Load() == 1 {
				f.failAll.Store(true) // the read-back fails until the term is over
				time.AfterFunc(term+time.Second, func() { f.failAll.Store(false) })
			}
		}
		m := newMonitor(t)
		stop := runCandidate(t, baseConfig(f, "a", m, nil))
		if tn := next(m); tn.Term == 0 {
			t.Errorf("elected with term 0, whose term ran out unseen; want a new tenure")
		}
		if ops := f.ops.Load(); ops >= 10_000 {
			t.Errorf("%d store calls: the candidate looped", ops)
		}
		stop()
	})
}

// With MaxClockSkew 0 there is no jitter, so a successor's wait ends right at
// the takeover time; it must then take over, not wait again for a moment that
// has already come.
func TestZeroSkewTakeoverDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := newMonitor(t)
		leaderStore := &faultyDecider{RaceDecider: mem}
		cfgA := baseConfig(leaderStore, "a", m, nil)
		cfgA.MaxClockSkew = 0
		stopA := runCandidate(t, cfgA)
		a := next(m)
		fb := &faultyDecider{RaceDecider: mem}
		fb.opLimit.Store(1_000)
		cfgB := baseConfig(pushingFaultyDecider{fb}, "b", m, nil)
		cfgB.MaxClockSkew = 0
		stopB := runCandidate(t, cfgB)
		leaderStore.failAll.Store(true)
		b := next(m)
		if b.ID != "b" || b.Start.After(a.TV.Get().Add(time.Second)) {
			t.Errorf("%s elected at %v, want b right after a's expiry %v", b.ID, b.Start, a.TV.Get())
		}
		if ops := fb.ops.Load(); ops >= 1_000 {
			t.Errorf("b made %d store calls waiting for one expiry: it spun", ops)
		}
		stopB()
		stopA()
	})
}

// cancelDuringReadBack hangs writes until their deadline, then cancels the
// caller's context during the read-back, which already has that deadline.
type cancelDuringReadBack struct {
	*faultyDecider
	cancel  context.CancelFunc
	written atomic.Bool
}

func (c *cancelDuringReadBack) WriteEntry(ctx context.Context, _ *entry.RaceEntry) (entry.LeaderToken, error) {
	<-ctx.Done()
	c.written.Store(true)
	return entry.LeaderToken{}, ctx.Err()
}

func (c *cancelDuringReadBack) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if c.written.Load() {
		c.cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, errInjected
	}
	return c.faultyDecider.ReadCurrent(ctx)
}

// Acquire reports its own context's error even when an operation's deadline
// passed first.
func TestAcquireReturnsContextError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		d := &cancelDuringReadBack{faultyDecider: &faultyDecider{RaceDecider: memory.NewDecider()}, cancel: cancel}
		cfg := baseConfig(d, "a", newMonitor(t), nil)
		if err := cfg.Acquire(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire = %v, want context.Canceled", err)
		}
	})
}

// nilReader breaks the RaceDecider contract: no record and no error.
type nilReader struct{ *faultyDecider }

func (nilReader) ReadCurrent(context.Context) (*entry.RaceEntry, error) { return nil, nil }

// A backend that returns neither a record nor an error is retried like a
// failing one, never dereferenced.
func TestNilRecordFromBackendIsAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		d := nilReader{&faultyDecider{RaceDecider: memory.NewDecider()}}
		if err := baseConfig(d, "a", newMonitor(t), nil).Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire = %v, want it to keep retrying until its context ends", err)
		}
	})
}

// coarseReads reports a record's commit time at whole seconds on reads, as an
// HTTP Last-Modified header does, while writes report it exactly.
type coarseReads struct{ *faultyDecider }

func (c coarseReads) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	rec, err := c.faultyDecider.ReadCurrent(ctx)
	if err == nil {
		rec.Token.CommitTime = rec.Token.CommitTime.Truncate(time.Second).Add(-time.Second)
	}
	return rec, err
}

// A failed extension read back unchanged is retried, even when the read
// reports the record's commit time differently from the write: only the
// version identifies a record.
func TestFailedExtensionReadBackWithOtherCommitTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &faultyDecider{RaceDecider: memory.NewDecider()}
		ousted := 0
		m := newMonitor(t)
		cfg := baseConfig(coarseReads{f}, "a", m, nil)
		cfg.OnOusting = func(context.Context) { ousted++ }
		stop := runCandidate(t, cfg)
		a := next(m)
		f.failNextWrites.Store(1) // the first extension
		time.Sleep(2 * term)
		synctest.Wait()
		if ousted != 0 || !a.TV.ValueInFuture() {
			t.Errorf("leader stepped down after one failed, unapplied extension (ousted %d times)", ousted)
		}
		stop()
	})
}

// A record numbered as high as an int64 goes (foreign, or made by hand)
// leaves no number for a tenure above it: Acquire ends with an error naming
// the store, where the next tenure's number wrapped to a negative fencing
// token, in a record that no candidate could read.
func TestElectionNumberAtItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		if _, err := mem.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: math.MaxInt64, Term: math.MaxInt64,
			LeaderID: "foreign", TermExpiry: time.Now(), Released: true, WriteID: "w"}); err != nil {
			t.Fatal(err)
		}
		err := leaderelection.Config{Decider: mem, LeaderID: "a", TermLength: term, MaxClockSkew: skew,
			OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
				t.Errorf("elected with fencing token %d", tv.Term())
			}}.Acquire(t.Context())
		if !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(err.Error(), "memory") || !strings.Contains(err.Error(), "no room") {
			t.Fatalf("Acquire on a record numbered MaxInt64 = %v; want an error wrapping ErrCorruptRecord, naming the store", err)
		}
		if rec, err := mem.ReadCurrent(t.Context()); err != nil || rec.ElectionNumber != math.MaxInt64 {
			t.Fatalf("the record after Acquire: %+v, %v; want it untouched", rec, err)
		}
	})
}
