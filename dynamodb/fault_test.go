package dynamodb_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	ledynamodb "github.com/racedecider/leaderelection/dynamodb"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// faulty is a Decider whose every request goes through a fault proxy, and
// one that goes to the server directly, on the same item.
type faulty struct {
	proxy  *faultproxy.Proxy
	d      *ledynamodb.Decider // through the proxy
	direct *ledynamodb.Decider // straight to the server
}

func newFaulty(t *testing.T, s *store, opts ...ledynamodb.Option) *faulty {
	t.Helper()
	p := faultproxy.Start(t, s.hostPort(t))
	d, key := s.decider(t, newClient(t, "http://"+p.Addr()), opts...)
	direct, err := ledynamodb.NewDecider(s.c, s.table, key)
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

func mustWrite(t *testing.T, d *ledynamodb.Decider, e *entry.RaceEntry) entry.LeaderToken {
	t.Helper()
	tok, err := d.WriteEntry(t.Context(), e)
	if err != nil {
		t.Fatalf("WriteEntry(%s): %v", e.WriteID, err)
	}
	return tok
}

func mustRead(t *testing.T, d *ledynamodb.Decider) *entry.RaceEntry {
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
	s := newStore(t)

	t.Run("latency", func(t *testing.T) {
		f := newFaulty(t, s)
		f.proxy.SetLatency(20 * time.Millisecond)
		racedecidertest.RaceWriters(t, slices.Repeat([]leaderelection.RaceDecider{f.d}, 10), 1)
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
				tok = mustWrite(t, f.d, faultRecord(0, "w-0", entry.LeaderToken{}))
				n = 1
			}
			f.proxy.DropResponses(1)
			got, err := f.d.WriteEntry(t.Context(), faultRecord(n, "w-mine", tok))
			if err != nil {
				t.Fatalf("WriteEntry whose first answer was dropped: %v; want success, recognised by the SDK's retry", err)
			}
			if st := f.proxy.Stats(); st.DroppedResponses != 1 {
				t.Fatalf("proxy stats %+v, want one dropped response", st)
			}
			cur := mustRead(t, f.direct)
			if cur.WriteID != "w-mine" || !cur.Token.SameVersion(got) {
				t.Fatalf("read %+v, want w-mine with the token WriteEntry returned (%s)", cur, got.Version)
			}
			// The token works for the next write.
			mustWrite(t, f.d, faultRecord(n+1, "w-next", got))
		})
	}

	t.Run("dropped response of a losing write", func(t *testing.T) {
		f := newFaulty(t, s)
		tok := mustWrite(t, f.d, faultRecord(0, "w-0", entry.LeaderToken{}))
		mustWrite(t, f.direct, faultRecord(1, "w-other", tok))
		f.proxy.DropResponses(1)
		_, err := f.d.WriteEntry(t.Context(), faultRecord(1, "w-stale", tok))
		if err == nil {
			t.Fatal("a stale write succeeded")
		}
		// The retry is refused and finds another record: after an attempt
		// whose fate is unknown that is not proof of a lost race.
		if errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("stale write with its answer dropped: %v; after an ambiguous attempt it must not claim a lost race", err)
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
		if got := mustRead(t, f.d); got.WriteID != "w-0" || !got.Token.SameVersion(tok) {
			t.Fatalf("read %+v, want w-0 with token %s", got, tok.Version)
		}
		// Resets on every attempt: an error, not a lost race, nothing written.
		f.proxy.ResetNext(100)
		_, err := f.d.WriteEntry(t.Context(), faultRecord(1, "w-1", tok))
		if err == nil || errors.Is(err, entry.ErrRaceLost) || errors.Is(err, entry.ErrRefused) {
			t.Fatalf("WriteEntry with every attempt reset: err = %v, want an unknown outcome", err)
		}
		if _, err := f.d.ReadCurrent(t.Context()); err == nil {
			t.Fatal("ReadCurrent with every attempt reset succeeded")
		}
		f.proxy.ResetNext(0)
		if got := mustRead(t, f.d); got.WriteID != "w-0" {
			t.Fatalf("read %+v after the reset writes, want w-0", got)
		}
	})

	t.Run("cut", func(t *testing.T) {
		f := newFaulty(t, s, ledynamodb.WithTimeout(5*time.Second))
		tok := mustWrite(t, f.d, faultRecord(0, "w-0", entry.LeaderToken{}))
		f.proxy.SetCut(true)
		if _, err := f.d.ReadCurrent(t.Context()); err == nil {
			t.Fatal("ReadCurrent while cut succeeded")
		}
		_, err := f.d.WriteEntry(t.Context(), faultRecord(1, "w-1", tok))
		if err == nil || errors.Is(err, entry.ErrRaceLost) || errors.Is(err, entry.ErrRefused) {
			t.Fatalf("WriteEntry while cut: err = %v, want an unknown outcome", err)
		}
		f.proxy.SetCut(false)
		if got := mustRead(t, f.d); got.WriteID != "w-0" {
			t.Fatalf("read %+v after the cut, want w-0", got)
		}
		mustWrite(t, f.d, faultRecord(1, "w-2", tok))
	})
}

// TestElection runs a full election through Config.Acquire: three
// candidates, each with its own client through its own fault proxy, so that
// one candidate's access can be cut while the others keep theirs.
func TestElection(t *testing.T) {
	s := newStore(t)
	key := newKey()
	racedecidertest.RunElection(t, func(t *testing.T, candidate int) racedecidertest.Access {
		p := faultproxy.Start(t, s.hostPort(t))
		d, err := ledynamodb.NewDecider(newClient(t, "http://"+p.Addr()), s.table, key)
		if err != nil {
			t.Fatal(err)
		}
		return racedecidertest.Access{Decider: d, Cut: p.SetCut}
	}, racedecidertest.Timing{TermLength: 2 * time.Second, MaxClockSkew: 200 * time.Millisecond})
}
