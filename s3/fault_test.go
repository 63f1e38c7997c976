package s3_test

import (
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	les3 "github.com/racedecider/leaderelection/s3"
)

// newFaulty returns a Decider whose every request goes through a fault
// proxy, and one that goes to the store directly, on the same key.
func newFaulty(t *testing.T, s *store, opts ...les3.Option) *faultproxy.Faulty {
	t.Helper()
	p := faultproxy.Start(t, s.hostPort(t))
	d, key := s.decider(t, s.client(t, "http://"+p.Addr()), opts...)
	direct, err := les3.NewDecider(s.client(t, ""), s.bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	return &faultproxy.Faulty{Proxy: p, D: d, Direct: direct}
}

// TestFaults runs the backend through a TCP proxy that delays, drops
// answers, resets and cuts connections.
func TestFaults(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		t.Run("latency", func(t *testing.T) {
			faultproxy.RaceUnderLatency(t, newFaulty(t, s))
		})

		t.Run("dropped response of an applied write", func(t *testing.T) {
			faultproxy.DroppedAppliedWrite(t, newFaulty(t, s), entry.ErrRaceLost)
		})

		t.Run("dropped response of a losing write", func(t *testing.T) {
			faultproxy.DroppedLosingWrite(t, newFaulty(t, s))
		})

		t.Run("reset", func(t *testing.T) {
			// One reset: the SDK retries, and the write lands once.
			faultproxy.Resets(t, newFaulty(t, s), entry.ErrRaceLost)
		})

		t.Run("cut", func(t *testing.T) {
			faultproxy.Cut(t, newFaulty(t, s, les3.WithTimeout(5*time.Second)), entry.ErrRaceLost)
		})
	})
}
