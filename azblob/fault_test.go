package azblob_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	leazblob "github.com/racedecider/leaderelection/azblob"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// faulty is a Decider whose every request goes through a fault proxy, and
// one that goes to Azurite directly, on the same blob.
type faulty struct {
	proxy  *faultproxy.Proxy
	d      *leazblob.Decider // through the proxy
	direct *leazblob.Decider // straight to Azurite
}

func newFaulty(t *testing.T, s *store, opts ...leazblob.Option) *faulty {
	t.Helper()
	p := faultproxy.Start(t, s.hostPort(t))
	d, name := s.decider(t, p.Addr(), opts...)
	direct, err := leazblob.NewDecider(s.client(t, "", s.container), name)
	if err != nil {
		t.Fatal(err)
	}
	return &faulty{proxy: p, d: d, direct: direct}
}

// TestFaults runs the backend through a TCP proxy that delays, drops
// answers, resets and cuts connections.
func TestFaults(t *testing.T) {
	s := azurite(t)

	t.Run("latency", func(t *testing.T) {
		f := newFaulty(t, s)
		f.proxy.SetLatency(20 * time.Millisecond)
		// Slow writers racing to create the blob, then on one ETag: exactly
		// one winner each time, and it is what the store holds.
		racedecidertest.RaceWriters(t, slices.Repeat([]leaderelection.RaceDecider{f.d}, 10), 1)
	})

	t.Run("dropped response of an applied write", func(t *testing.T) {
		f := newFaulty(t, s)
		tok := mustWrite(t, f.d, record(0, "w-0", entry.LeaderToken{}))
		f.proxy.DropResponses(1)
		_, err := f.d.WriteEntry(t.Context(), record(1, "w-1", tok))
		if err == nil {
			t.Fatal("WriteEntry succeeded although its answer was dropped")
		}
		// The retry finds the ETag changed by the first attempt: that must
		// not read as a lost race, the write was applied.
		if errors.Is(err, entry.ErrRaceLost) || errors.Is(err, entry.ErrRefused) || errors.Is(err, entry.ErrThrottled) {
			t.Fatalf("WriteEntry whose answer was dropped: %v; want an unknown outcome, the write was applied", err)
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

	t.Run("dropped response of a create", func(t *testing.T) {
		f := newFaulty(t, s)
		f.proxy.DropResponses(1)
		_, err := f.d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
		if err == nil || errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("create whose answer was dropped: err = %v, want an unknown outcome", err)
		}
		t.Logf("ambiguous create: %v", err)
		if got := mustRead(t, f.d); got.WriteID != "w-0" {
			t.Fatalf("read back %+v, want our write w-0", got)
		}
	})

	t.Run("dropped response of a losing write", func(t *testing.T) {
		f := newFaulty(t, s)
		tok := mustWrite(t, f.d, record(0, "w-0", entry.LeaderToken{}))
		mustWrite(t, f.direct, record(1, "w-other", tok))
		f.proxy.DropResponses(1)
		_, err := f.d.WriteEntry(t.Context(), record(1, "w-stale", tok))
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
		// One reset: WriteEntry retries, and the write lands once.
		f.proxy.ResetNext(1)
		tok := mustWrite(t, f.d, record(0, "w-0", entry.LeaderToken{}))
		if st := f.proxy.Stats(); st.Resets != 1 {
			t.Fatalf("proxy stats %+v, want one reset", st)
		}
		// One reset on a read: the SDK retries it.
		f.proxy.ResetNext(1)
		if got := mustRead(t, f.d); got.WriteID != "w-0" || got.Token.Version != tok.Version {
			t.Fatalf("read %+v, want w-0 with token %s", got, tok.Version)
		}
		// Resets on every attempt: an error, not a lost race, nothing written.
		f.proxy.ResetNext(100)
		_, err := f.d.WriteEntry(t.Context(), record(1, "w-1", tok))
		if err == nil || errors.Is(err, entry.ErrRaceLost) || errors.Is(err, entry.ErrRefused) {
			t.Fatalf("WriteEntry with every attempt reset: err = %v, want an unknown outcome", err)
		}
		t.Logf("every attempt reset: %v", err)
		if _, err := f.d.ReadCurrent(t.Context()); err == nil {
			t.Fatal("ReadCurrent with every attempt reset succeeded")
		}
		f.proxy.ResetNext(0)
		if got := mustRead(t, f.d); got.WriteID != "w-0" {
			t.Fatalf("read %+v after refused writes, want w-0", got)
		}
	})

	t.Run("cut", func(t *testing.T) {
		f := newFaulty(t, s, leazblob.WithTimeout(3*time.Second))
		tok := mustWrite(t, f.d, record(0, "w-0", entry.LeaderToken{}))
		f.proxy.SetCut(true)
		start := time.Now()
		if _, err := f.d.ReadCurrent(t.Context()); err == nil {
			t.Fatal("ReadCurrent while cut succeeded")
		}
		_, err := f.d.WriteEntry(t.Context(), record(1, "w-1", tok))
		if err == nil || errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("WriteEntry while cut: err = %v, want an error other than a lost race", err)
		}
		t.Logf("cut: errors after %v: %v", time.Since(start), err)
		f.proxy.SetCut(false)
		if got := mustRead(t, f.d); got.WriteID != "w-0" {
			t.Fatalf("read %+v after the cut, want w-0", got)
		}
		mustWrite(t, f.d, record(1, "w-2", tok))
	})
}

// TestElection runs a full election through Config.Acquire: three
// candidates, each with its own client through its own fault proxy, so that
// one candidate's access can be cut while the others keep theirs.
func TestElection(t *testing.T) {
	s := azurite(t)
	name := newBlob()
	racedecidertest.RunElection(t, func(t *testing.T, candidate int) racedecidertest.Access {
		p := faultproxy.Start(t, s.hostPort(t))
		d, err := leazblob.NewDecider(s.client(t, p.Addr(), s.container), name, leazblob.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return racedecidertest.Access{Decider: d, Cut: p.SetCut}
	}, racedecidertest.Timing{TermLength: 2 * time.Second, MaxClockSkew: 200 * time.Millisecond})
}
