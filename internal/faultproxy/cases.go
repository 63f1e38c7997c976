package faultproxy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// The functions below are fault scenarios that several backends share. Each
// takes the error classes (entry.ErrRaceLost, entry.ErrRefused,
// entry.ErrThrottled) that the backend's error must not have where a write's
// outcome is unknown to it: what a backend may claim there depends on how its
// client retries, so each backend names its own list.

// mustFail fails t unless err is an error, of none of the classes not; what
// names the call.
func mustFail(t *testing.T, err error, what string, not []error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded", what)
	}
	for _, c := range not {
		if errors.Is(err, c) {
			t.Fatalf("%s: %v; it must not be %v", what, err, c)
		}
	}
	t.Logf("%s: %v", what, err)
}

// RaceUnderLatency races ten writers through f's slowed proxy, to create the
// record and then on one token: exactly one winner each time, and it is
// what the store holds.
func RaceUnderLatency(t *testing.T, f *Faulty) {
	f.Proxy.SetLatency(20 * time.Millisecond)
	racedecidertest.RaceWriters(t, slices.Repeat([]leaderelection.RaceDecider{f.D}, 10), 1)
}

// DroppedAppliedWrite drops the answer to a replacing write the store
// applied: WriteEntry must fail with none of the classes not, and reading
// back shows the write.
func DroppedAppliedWrite(t *testing.T, f *Faulty, not ...error) {
	tok := MustWrite(t, f.D, Record(0, "w-0", entry.LeaderToken{}))
	f.Proxy.DropResponses(1)
	_, err := f.D.WriteEntry(t.Context(), Record(1, "w-1", tok))
	mustFail(t, err, "WriteEntry whose answer was dropped (the write was applied)", not)
	if st := f.Proxy.Stats(); st.DroppedResponses != 1 {
		t.Fatalf("proxy stats %+v, want one dropped response", st)
	}
	// The engine's read-back: the write id shows the write was applied.
	if got := MustRead(t, f.D); got.WriteID != "w-1" || got.ElectionNumber != 1 {
		t.Fatalf("read back %+v, want our write w-1", got)
	}
}

// AmbiguousWrites runs a create and a replace (subtests Create and Replace),
// each on a fresh record from newFaulty, whose answer is dropped after the
// store applied it: the error must say "outcome unknown" and be none of the
// classes not, and reading back, directly and through the proxy, shows the
// write.
func AmbiguousWrites(t *testing.T, newFaulty func(t *testing.T) *Faulty, not ...error) {
	for _, create := range []bool{true, false} {
		name := map[bool]string{true: "Create", false: "Replace"}[create]
		t.Run(name, func(t *testing.T) {
			f := newFaulty(t)
			var tok entry.LeaderToken
			n := int64(0)
			if !create {
				tok = MustWrite(t, f.Direct, Record(0, "w-seed", entry.LeaderToken{}))
				n = 1
			}
			f.Proxy.DropResponses(1)
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			_, err := f.D.WriteEntry(ctx, Record(n, "w-ambiguous", tok))
			mustFail(t, err, "WriteEntry whose answer was dropped (the write was applied)", not)
			if !strings.Contains(err.Error(), "outcome unknown") {
				t.Errorf("error %q does not say the outcome is unknown", err)
			}
			if st := f.Proxy.Stats(); st.DroppedResponses != 1 {
				t.Errorf("proxy stats %+v, want 1 dropped response", st)
			}
			for _, d := range []leaderelection.RaceDecider{f.Direct, f.D} {
				if got := MustRead(t, d); got.WriteID != "w-ambiguous" || got.ElectionNumber != n {
					t.Fatalf("read back %+v; want the ambiguous write (election %d), which was applied", got, n)
				}
			}
		})
	}
}

// DroppedLosingWrite drops the answer to a stale write, one whose token
// another writer has already replaced: WriteEntry fails with none of the
// classes not, and the other writer's record stays.
func DroppedLosingWrite(t *testing.T, f *Faulty, not ...error) {
	tok := MustWrite(t, f.D, Record(0, "w-0", entry.LeaderToken{}))
	MustWrite(t, f.Direct, Record(1, "w-other", tok))
	f.Proxy.DropResponses(1)
	_, err := f.D.WriteEntry(t.Context(), Record(1, "w-stale", tok))
	mustFail(t, err, "stale write with its answer dropped", not)
	if got := MustRead(t, f.D); got.WriteID != "w-other" {
		t.Fatalf("read back %+v, want w-other untouched", got)
	}
}

// Resets resets connections before requests reach the store. One reset: the
// client retries, and the write lands once; a read retries likewise. Resets
// on every attempt: WriteEntry fails with none of the classes not (which
// should include entry.ErrRaceLost), ReadCurrent fails, and nothing was
// written.
func Resets(t *testing.T, f *Faulty, not ...error) {
	f.Proxy.ResetNext(1)
	tok := MustWrite(t, f.D, Record(0, "w-0", entry.LeaderToken{}))
	if st := f.Proxy.Stats(); st.Resets != 1 {
		t.Fatalf("proxy stats %+v, want one reset", st)
	}
	f.Proxy.ResetNext(1)
	if got := MustRead(t, f.D); got.WriteID != "w-0" || !got.Token.SameVersion(tok) {
		t.Fatalf("read %+v, want w-0 with token %s", got, tok.Version)
	}
	f.Proxy.ResetNext(100)
	_, err := f.D.WriteEntry(t.Context(), Record(1, "w-1", tok))
	mustFail(t, err, "WriteEntry with every attempt reset", not)
	if _, err := f.D.ReadCurrent(t.Context()); err == nil {
		t.Fatal("ReadCurrent with every attempt reset succeeded")
	}
	f.Proxy.ResetNext(0)
	if got := MustRead(t, f.D); got.WriteID != "w-0" {
		t.Fatalf("read %+v after the reset writes, want w-0", got)
	}
}

// Cut cuts f off from the store: ReadCurrent fails, WriteEntry fails with
// none of the classes not (which should include entry.ErrRaceLost), and
// once access returns the record is unchanged and writable. f's decider
// should have a timeout of a few seconds, or the calls wait for the test's.
func Cut(t *testing.T, f *Faulty, not ...error) {
	tok := MustWrite(t, f.D, Record(0, "w-0", entry.LeaderToken{}))
	f.Proxy.SetCut(true)
	start := time.Now()
	if _, err := f.D.ReadCurrent(t.Context()); err == nil {
		t.Fatal("ReadCurrent while cut succeeded")
	}
	_, err := f.D.WriteEntry(t.Context(), Record(1, "w-1", tok))
	mustFail(t, err, "WriteEntry while cut", not)
	t.Logf("cut: errors after %v", time.Since(start))
	f.Proxy.SetCut(false)
	if got := MustRead(t, f.D); got.WriteID != "w-0" {
		t.Fatalf("read %+v after the cut, want w-0", got)
	}
	MustWrite(t, f.D, Record(1, "w-2", tok))
}

// MissesDeadline slows p by latency and checks that a write and a read
// through d, each with a 50ms deadline, fail with context.DeadlineExceeded.
// The timed-out write may still reach the store once its delay is over.
func MissesDeadline(t *testing.T, p *Proxy, d leaderelection.RaceDecider, latency time.Duration) {
	t.Helper()
	p.SetLatency(latency)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := d.WriteEntry(ctx, Record(0, "w-slow", entry.LeaderToken{})); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write slower than its deadline: %v; want context.DeadlineExceeded", err)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	if _, err := d.ReadCurrent(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read slower than its deadline: %v; want context.DeadlineExceeded", err)
	}
}
