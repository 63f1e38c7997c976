package leaderelection_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
	"github.com/racedecider/leaderelection/internal/testenv"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// rateStore is a memory.Decider that, like Cloud Storage, throttles a write
// sent within interval of the last write it applied, and answers every
// request after leg each way.
type rateStore struct {
	mem           *memory.Decider
	leg, interval time.Duration

	mu          sync.Mutex
	lastApplied time.Time
	writes      int
	lost        int // writes that lost a race
	throttled   int // writes that would have been applied too soon
}

func (s *rateStore) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	time.Sleep(s.leg)
	rec, err := s.mem.ReadCurrent(ctx)
	time.Sleep(s.leg)
	return rec, err
}

func (s *rateStore) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	time.Sleep(s.leg)
	s.mu.Lock()
	s.writes++
	if cur, err := s.mem.ReadCurrent(context.WithoutCancel(ctx)); err == nil && !cur.Token.SameVersion(e.Token) {
		// A lost race: the object is not changed, so the rate does not
		// apply (as Cloud Storage checks preconditions first).
		s.lost++
		s.mu.Unlock()
		time.Sleep(s.leg)
		return entry.LeaderToken{}, fmt.Errorf("test store: 412 precondition failed: %w", entry.ErrRaceLost)
	}
	if !s.lastApplied.IsZero() && time.Since(s.lastApplied) < s.interval {
		s.throttled++
		s.mu.Unlock()
		time.Sleep(s.leg)
		return entry.LeaderToken{}, fmt.Errorf("test store: 429 rate limit on one object: %w", entry.ErrThrottled)
	}
	// Applied even if the caller has given up by now, as by a store the
	// request has reached.
	tok, err := s.mem.WriteEntry(context.WithoutCancel(ctx), e)
	if err == nil {
		s.lastApplied = time.Now()
	}
	s.mu.Unlock()
	time.Sleep(s.leg)
	if err == nil && ctx.Err() != nil {
		return entry.LeaderToken{}, ctx.Err()
	}
	return tok, err
}

// spacedStore declares the store's write interval (leaderelection.WriteSpacer).
type spacedStore struct{ *rateStore }

func (s spacedStore) MinWriteInterval() time.Duration { return s.interval }

// handOversOnRateStore runs 3 candidates on a polling store that takes one
// write a second, hands over gracefully 10 times at random points of the
// term, and returns the store's counts and the hand-over times.
func handOversOnRateStore(t *testing.T, declared bool, seed uint64) (writes, throttled int, handOvers []time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		oddStart()
		st := &rateStore{mem: memory.NewDecider(), leg: 100 * time.Millisecond, interval: time.Second}
		var d leaderelection.RaceDecider = st
		if declared {
			d = spacedStore{st}
		}
		mon := newMonitor(t)
		cands := map[string]*racedecidertest.Candidate{}
		n := 0
		start := func() {
			n++
			id := "c" + itoa(n)
			ctx := hooks.WithRand(t.Context(), rand.New(rand.NewPCG(seed, uint64(n))))
			cands[id] = racedecidertest.StartCandidate(ctx, leaderelection.Config{
				Decider: d, LeaderID: id, OnElected: mon.OnElected(id),
				TermLength: 4 * time.Second, MaxClockSkew: 500 * time.Millisecond,
			})
		}
		for range 3 {
			start()
		}
		tn := next(mon)
		r := rand.New(rand.NewPCG(seed, 99))
		for range 10 {
			time.Sleep(time.Second + time.Duration(r.Int64N(int64(3*time.Second))))
			t0 := time.Now()
			cands[tn.ID].Stop(t)
			delete(cands, tn.ID)
			tn = next(mon)
			handOvers = append(handOvers, time.Since(t0))
			start()
		}
		for _, c := range cands {
			c.Stop(t)
		}
		writes, throttled = st.writes, st.throttled
	})
	return writes, throttled, handOvers
}

// A store that declares its write rate (WriteSpacer) gets no write sooner
// than that after the last: neither the release right after an extension
// nor the acquisition right after a release is throttled, where candidates
// that do not know of the rate are throttled on most hand-overs. The
// acquisition counts the interval from when the release was sent, not from
// when a poll found it.
func TestWriteSpacingKeepsToTheStoreRate(t *testing.T) {
	var spaced, blind [2]int
	var spacedHO, blindHO []time.Duration
	for seed := range uint64(5) {
		w, th, ho := handOversOnRateStore(t, true, seed)
		spaced[0], spaced[1], spacedHO = spaced[0]+w, spaced[1]+th, append(spacedHO, ho...)
		w, th, ho = handOversOnRateStore(t, false, seed)
		blind[0], blind[1], blindHO = blind[0]+w, blind[1]+th, append(blindHO, ho...)
	}
	t.Logf("50 hand-overs: declared rate: %d writes, %d throttled, hand-over median %v; undeclared: %d writes, %d throttled, median %v",
		spaced[0], spaced[1], median(spacedHO), blind[0], blind[1], median(blindHO))
	if blind[1] < 10 {
		t.Fatalf("only %d writes throttled without the declared rate: the test no longer shows what it checks", blind[1])
	}
	if spaced[1] > 0 {
		t.Errorf("%d of %d writes throttled with the rate declared, want none", spaced[1], spaced[0])
	}
	// A poll finds a release P/3 after it on average: by then most of the
	// interval has passed, and a candidate that waited it all again from
	// there (as it did when it went by when it learnt of the release) made
	// the median hand-over 2.1 s.
	if m, b := median(spacedHO), median(blindHO); m > b*115/100 {
		t.Errorf("hand-over median %v with the rate declared, %v without: keeping the rate should cost at most 15%%", m, b)
	}
}

// A sizing that does not suit the store is reported at start-up: a term too
// short for its write rate at once, writes slower than a quarter of the term
// at the first such write, each once.
func TestStartUpWarnsOfUnsuitableSizing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		leg      time.Duration
		want     string
	}{
		{"term too short for the write rate", time.Second, time.Millisecond, "TermLength is too short for this store's write rate"},
		{"writes too slow for the term", 0, 700 * time.Millisecond, "a write took more than a quarter of TermLength"},
		{"suitable", 500 * time.Millisecond, 100 * time.Millisecond, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs testenv.SyncBuffer
				st := spacedStore{&rateStore{mem: memory.NewDecider(), leg: tc.leg, interval: tc.interval}}
				cfg := baseConfig(st, "a", newMonitor(t), nil)
				cfg.TermLength = 2 * time.Second
				cfg.MaxClockSkew = 100 * time.Millisecond
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				stop := runCandidate(t, cfg)
				time.Sleep(5 * cfg.TermLength)
				stop()
				warnings := strings.Count(logs.String(), "level=WARN")
				switch {
				case tc.want == "" && warnings > 0:
					t.Errorf("warned of a suitable sizing:\n%s", &logs)
				case tc.want != "" && (!strings.Contains(logs.String(), tc.want) || strings.Count(logs.String(), tc.want) != 1):
					t.Errorf("want one warning %q, got:\n%s", tc.want, &logs)
				}
			})
		})
	}
}

// A leader stopped while an extension is on its way, which the store then
// applies: the release that follows at once must keep the store's write
// interval from that extension too, though the leader never learnt it was
// applied.
func TestReleaseAfterAnUnansweredExtensionKeepsTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &rateStore{mem: memory.NewDecider(), leg: 100 * time.Millisecond, interval: time.Second}
		ext := make(chan struct{}, 1)
		cfg := baseConfig(extensionSignal{spacedStore{st}, ext}, "a", newMonitor(t), nil)
		cfg.TermLength = 4 * time.Second
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- cfg.Acquire(ctx) }()
		<-ext // the first extension is sent
		time.Sleep(50 * time.Millisecond)
		cancel() // before it reaches the store, 50 ms later
		<-done
		time.Sleep(10 * time.Second)
		st.mu.Lock()
		defer st.mu.Unlock()
		rec, _ := st.mem.ReadCurrent(t.Context())
		if st.throttled > 0 || !rec.Released {
			t.Errorf("%d writes throttled of %d; record released: %v; want the release a second after the extension", st.throttled, st.writes, rec.Released)
		}
	})
}

// extensionSignal tells of each extension (a write that keeps the Term of
// the record it replaces) as it is sent.
type extensionSignal struct {
	spacedStore
	sent chan<- struct{}
}

func (e extensionSignal) WriteEntry(ctx context.Context, r *entry.RaceEntry) (entry.LeaderToken, error) {
	if !r.Released && r.Term < r.ElectionNumber {
		select {
		case e.sent <- struct{}{}:
		default:
		}
	}
	return e.spacedStore.WriteEntry(ctx, r)
}
