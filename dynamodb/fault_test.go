package dynamodb_test

import (
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	ledynamodb "github.com/racedecider/leaderelection/dynamodb"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// newFaulty returns a Decider whose every request goes through a fault
// proxy, and one that goes to the server directly, on the same item.
func newFaulty(t *testing.T, s *store, opts ...ledynamodb.Option) *faultproxy.Faulty {
	t.Helper()
	p := faultproxy.Start(t, s.hostPort(t))
	d, key := s.decider(t, newClient(t, "http://"+p.Addr()), opts...)
	direct, err := ledynamodb.NewDecider(s.c, s.table, key)
	if err != nil {
		t.Fatal(err)
	}
	return &faultproxy.Faulty{Proxy: p, D: d, Direct: direct}
}

// TestFaults runs the backend through a TCP proxy that delays, drops
// answers, resets and cuts connections.
func TestFaults(t *testing.T) {
	s := newStore(t)

	t.Run("latency", func(t *testing.T) {
		faultproxy.RaceUnderLatency(t, newFaulty(t, s))
	})

	// The SDK retries a PutItem whose answer was lost; the retry fails its
	// condition because the first attempt was applied. WriteEntry must see
	// its own write in the item returned with the refusal and succeed.
	for _, tc := range []struct {
		name  string
		first bool // the write creates the item
	}{{"create", true}, {"replace", false}} {
		t.Run("dropped response of an applied write: "+tc.name, func(t *testing.T) {
			f := newFaulty(t, s)
			var tok entry.LeaderToken
			n := int64(0)
			if !tc.first {
				tok = faultproxy.MustWrite(t, f.D, faultproxy.Record(0, "w-0", entry.LeaderToken{}))
				n = 1
			}
			f.Proxy.DropResponses(1)
			got, err := f.D.WriteEntry(t.Context(), faultproxy.Record(n, "w-mine", tok))
			if err != nil {
				t.Fatalf("WriteEntry whose first answer was dropped: %v; want success, recognised by the SDK's retry", err)
			}
			if st := f.Proxy.Stats(); st.DroppedResponses != 1 {
				t.Fatalf("proxy stats %+v, want one dropped response", st)
			}
			cur := faultproxy.MustRead(t, f.Direct)
			if cur.WriteID != "w-mine" || !cur.Token.SameVersion(got) {
				t.Fatalf("read %+v, want w-mine with the token WriteEntry returned (%s)", cur, got.Version)
			}
			// The token works for the next write.
			faultproxy.MustWrite(t, f.D, faultproxy.Record(n+1, "w-next", got))
		})
	}

	t.Run("dropped response of a losing write", func(t *testing.T) {
		// The retry is refused and finds another record: after an attempt
		// whose fate is unknown that is not proof of a lost race.
		faultproxy.DroppedLosingWrite(t, newFaulty(t, s), entry.ErrRaceLost)
	})

	t.Run("reset", func(t *testing.T) {
		// One reset: the SDK retries, and the write lands once.
		faultproxy.Resets(t, newFaulty(t, s), entry.ErrRaceLost, entry.ErrRefused)
	})

	t.Run("cut", func(t *testing.T) {
		faultproxy.Cut(t, newFaulty(t, s, ledynamodb.WithTimeout(5*time.Second)), entry.ErrRaceLost, entry.ErrRefused)
	})
}

// TestElection runs a full election through Config.Acquire: three
// candidates, each with its own client through its own fault proxy, so that
// one candidate's access can be cut while the others keep theirs.
func TestElection(t *testing.T) {
	s := newStore(t)
	key := newKey()
	faultproxy.RunElection(t, s.hostPort(t), func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		d, err := ledynamodb.NewDecider(newClient(t, "http://"+proxyAddr), s.table, key)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, racedecidertest.Timing{TermLength: 2 * time.Second, MaxClockSkew: 200 * time.Millisecond})
}
