package s3_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
	les3 "github.com/racedecider/leaderelection/s3"
)

// faulty is a Decider whose every request goes through a fault proxy, and
// one that goes to the store directly, on the same key.
type faulty struct {
	proxy  *faultproxy.Proxy
	d      *les3.Decider // through the proxy
	direct *les3.Decider // straight to the store
}

func newFaulty(t *testing.T, s *store, opts ...les3.Option) *faulty {
	t.Helper()
	p := faultproxy.Start(t, s.hostPort(t))
	d, key := s.decider(t, s.client(t, "http://"+p.Addr()), opts...)
	direct, err := les3.NewDecider(s.client(t, ""), s.bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	return &faulty{proxy: p, d: d, direct: direct}
}

func faultRecord(n int64, writeID string, tok entry.LeaderToken) *entry.RaceEntry {
	return &entry.RaceEntry{
		ElectionNumber: n, Term: n, LeaderID: "leader-" + writeID,
		TermExpiry: time.Now().Add(time.Minute).UTC(), WriteID: writeID, Token: tok,
	}
}

func mustWrite(t *testing.T, d *les3.Decider, e *entry.RaceEntry) entry.LeaderToken {
	t.Helper()
	tok, err := d.WriteEntry(t.Context(), e)
	if err != nil {
		t.Fatalf("WriteEntry(%s): %v", e.WriteID, err)
	}
	return tok
}

func mustRead(t *testing.T, d *les3.Decider) *entry.RaceEntry {
	t.Helper()
	e, err := d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatalf("ReadCurrent: %v", err)
	}
	return e
}

// TestFaults runs the backend through a TCP proxy that delays, drops
// answers, resets and cuts connections.
func TestFaults(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		t.Run("latency", func(t *testing.T) {
			f := newFaulty(t, s)
			f.proxy.SetLatency(20 * time.Millisecond)
			// Slow writers racing to create the object, then on one ETag:
			// exactly one winner each time, and it is what the store holds.
			racedecidertest.RaceWriters(t, slices.Repeat([]leaderelection.RaceDecider{f.d}, 10), 1)
		})

		t.Run("dropped response of an applied write", func(t *testing.T) {
			f := newFaulty(t, s)
			tok := mustWrite(t, f.d, faultRecord(0, "w-0", entry.LeaderToken{}))
			f.proxy.DropResponses(1)
			_, err := f.d.WriteEntry(t.Context(), faultRecord(1, "w-1", tok))
			if err == nil {
				t.Fatal("WriteEntry succeeded although its answer was dropped")
			}
			if errors.Is(err, entry.ErrRaceLost) {
				t.Fatalf("WriteEntry whose answer was dropped: %v; it must not claim a lost race, the write was applied", err)
			}
			t.Logf("ambiguous write: %v", err)
			if st := f.proxy.Stats(); st.DroppedResponses != 1 {
				t.Fatalf("proxy stats %+v, want one dropped response", st)
			}
			// The engine's read-back: the write id shows the write was applied.
			if got := mustRead(t, f.d); got.WriteID != "w-1" || got.ElectionNumber != 1 {
				t.Fatalf("read back %+v, want our write w-1", got)
			}
		})

		t.Run("dropped response of a losing write", func(t *testing.T) {
			f := newFaulty(t, s)
			tok := mustWrite(t, f.d, faultRecord(0, "w-0", entry.LeaderToken{}))
			mustWrite(t, f.direct, faultRecord(1, "w-other", tok))
			f.proxy.DropResponses(1)
			_, err := f.d.WriteEntry(t.Context(), faultRecord(1, "w-stale", tok))
			if err == nil {
				t.Fatal("a stale write succeeded")
			}
			t.Logf("stale write with its answer dropped: %v", err)
			if got := mustRead(t, f.d); got.WriteID != "w-other" {
				t.Fatalf("read back %+v, want w-other untouched", got)
			}
		})

		t.Run("reset", func(t *testing.T) {
			f := newFaulty(t, s)
			// One reset: the SDK retries, and the write lands once.
			f.proxy.ResetNext(1)
			tok := mustWrite(t, f.d, faultRecord(0, "w-0", entry.LeaderToken{}))
			if st := f.proxy.Stats(); st.Resets != 1 {
				t.Fatalf("proxy stats %+v, want one reset", st)
			}
			f.proxy.ResetNext(1)
			if got := mustRead(t, f.d); got.WriteID != "w-0" || got.Token.Version != tok.Version {
				t.Fatalf("read %+v, want w-0 with token %s", got, tok.Version)
			}
			// Resets on every attempt: an error, not a lost race, nothing written.
			f.proxy.ResetNext(100)
			_, err := f.d.WriteEntry(t.Context(), faultRecord(1, "w-1", tok))
			if err == nil || errors.Is(err, entry.ErrRaceLost) {
				t.Fatalf("WriteEntry with every attempt reset: err = %v, want an error other than a lost race", err)
			}
			if _, err := f.d.ReadCurrent(t.Context()); err == nil {
				t.Fatal("ReadCurrent with every attempt reset succeeded")
			}
			f.proxy.ResetNext(0)
			if got := mustRead(t, f.d); got.WriteID != "w-0" {
				t.Fatalf("read %+v after refused writes, want w-0", got)
			}
		})

		t.Run("cut", func(t *testing.T) {
			f := newFaulty(t, s, les3.WithTimeout(5*time.Second))
			tok := mustWrite(t, f.d, faultRecord(0, "w-0", entry.LeaderToken{}))
			f.proxy.SetCut(true)
			start := time.Now()
			if _, err := f.d.ReadCurrent(t.Context()); err == nil {
				t.Fatal("ReadCurrent while cut succeeded")
			}
			_, err := f.d.WriteEntry(t.Context(), faultRecord(1, "w-1", tok))
			if err == nil || errors.Is(err, entry.ErrRaceLost) {
				t.Fatalf("WriteEntry while cut: err = %v, want an error other than a lost race", err)
			}
			t.Logf("cut: errors after %v: %v", time.Since(start), err)
			f.proxy.SetCut(false)
			if got := mustRead(t, f.d); got.WriteID != "w-0" {
				t.Fatalf("read %+v after the cut, want w-0", got)
			}
			mustWrite(t, f.d, faultRecord(1, "w-2", tok))
		})
	})
}
