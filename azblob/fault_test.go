package azblob_test

import (
	"errors"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	leazblob "github.com/racedecider/leaderelection/azblob"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// newFaulty returns a Decider whose every request goes through a fault
// proxy, and one that goes to Azurite directly, on the same blob.
func newFaulty(t *testing.T, s *store, opts ...leazblob.Option) *faultproxy.Faulty {
	t.Helper()
	p := faultproxy.Start(t, s.hostPort(t))
	d, name := s.decider(t, p.Addr(), opts...)
	direct, err := leazblob.NewDecider(s.client(t, "", s.container), name)
	if err != nil {
		t.Fatal(err)
	}
	return &faultproxy.Faulty{Proxy: p, D: d, Direct: direct}
}

// TestFaults runs the backend through a TCP proxy that delays, drops
// answers, resets and cuts connections.
func TestFaults(t *testing.T) {
	s := azurite(t)

	t.Run("latency", func(t *testing.T) {
		faultproxy.RaceUnderLatency(t, newFaulty(t, s))
	})

	t.Run("dropped response of an applied write", func(t *testing.T) {
		// The retry finds the ETag changed by the first attempt: that must
		// not read as a lost race, the write was applied.
		faultproxy.DroppedAppliedWrite(t, newFaulty(t, s), entry.ErrRaceLost, entry.ErrRefused, entry.ErrThrottled)
	})

	t.Run("dropped response of a create", func(t *testing.T) {
		f := newFaulty(t, s)
		f.Proxy.DropResponses(1)
		_, err := f.D.WriteEntry(t.Context(), faultproxy.Record(0, "w-0", entry.LeaderToken{}))
		if err == nil || errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("create whose answer was dropped: err = %v, want an unknown outcome", err)
		}
		t.Logf("ambiguous create: %v", err)
		if got := faultproxy.MustRead(t, f.D); got.WriteID != "w-0" {
			t.Fatalf("read back %+v, want our write w-0", got)
		}
	})

	t.Run("dropped response of a losing write", func(t *testing.T) {
		faultproxy.DroppedLosingWrite(t, newFaulty(t, s))
	})

	t.Run("reset", func(t *testing.T) {
		// One reset: WriteEntry retries, and the write lands once; one reset
		// on a read: the SDK retries it.
		faultproxy.Resets(t, newFaulty(t, s), entry.ErrRaceLost, entry.ErrRefused)
	})

	t.Run("cut", func(t *testing.T) {
		faultproxy.Cut(t, newFaulty(t, s, leazblob.WithTimeout(3*time.Second)), entry.ErrRaceLost)
	})
}

// TestElection runs a full election through Config.Acquire: three
// candidates, each with its own client through its own fault proxy, so that
// one candidate's access can be cut while the others keep theirs.
func TestElection(t *testing.T) {
	s := azurite(t)
	name := newBlob()
	faultproxy.RunElection(t, s.hostPort(t), func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		d, err := leazblob.NewDecider(s.client(t, proxyAddr, s.container), name, leazblob.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, racedecidertest.Timing{TermLength: 2 * time.Second, MaxClockSkew: 200 * time.Millisecond})
}
