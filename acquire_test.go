package leaderelection_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/racedecider/leaderelection/internal/skewclock"
	clocks "github.com/vimeo/go-clocks"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

func TestFirstElectionAndTwoExtensionsPerTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		f := &faultyDecider{RaceDecider: mem}
		r := newMonitor(t)
		var changed []entry.RaceEntry
		cfg := baseConfig(f, "a", r, nil)
		cfg.LeaderChanged = func(_ context.Context, e entry.RaceEntry) { changed = append(changed, e) }
		stop := runCandidate(t, cfg)
		tn := next(r)
		start := time.Now()
		// The first record is numbered from the writer's clock, so that a
		// deletion can never bring fencing tokens back down.
		if tn.ID != "a" || tn.Term != start.UnixMicro() {
			t.Fatalf("elected %s with term %d, want a with term %d (the clock in Unix µs)", tn.ID, tn.Term, start.UnixMicro())
		}
		if got, want := tn.TV.Get(), start.Add(term); got.After(want) {
			t.Errorf("TimeView %v later than election + TermLength %v", got, want)
		}
		writesAtElection := f.writes.Load()
		time.Sleep(5 * term) // virtual time
		synctest.Wait()
		extensions := f.writes.Load() - writesAtElection
		if extensions < 9 || extensions > 10 {
			t.Errorf("%d extensions in 5 terms, want about 10 (twice per term)", extensions)
		}
		if !tn.TV.ValueInFuture() {
			t.Error("leader's TimeView expired although every extension succeeded")
		}
		rec, _ := mem.ReadCurrent(t.Context())
		if rec.Term != tn.Term || rec.LeaderID != "a" || rec.ElectionNumber != tn.Term+extensions {
			t.Errorf("record %+v: want term %d held by a, election number %d", rec, tn.Term, tn.Term+extensions)
		}
		if len(changed) != 1 || changed[0].LeaderID != "a" {
			t.Errorf("LeaderChanged calls %+v, want one for a", changed)
		}
		stop()
	})
}

func TestLeaderWithFailedStoreStopsAtExpiry(t *testing.T) {
	for _, mode := range []string{"errors", "hangs"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &faultyDecider{RaceDecider: memory.NewDecider()}
				r := newMonitor(t)
				var ousted time.Time
				cfg := baseConfig(f, "a", r, nil)
				cfg.OnOusting = func(context.Context) { ousted = time.Now() }
				stop := runCandidate(t, cfg)
				tn := next(r)
				time.Sleep(term / 4)
				if mode == "hangs" {
					f.hang.Store(true)
				} else {
					f.failAll.Store(true)
				}
				expiry := tn.TV.Get()
				time.Sleep(time.Until(expiry))
				synctest.Wait()
				if tn.TV.ValueInFuture() {
					t.Fatalf("TimeView still valid at its own expiry")
				}
				if tn.Ended.IsZero() || tn.Ended.After(expiry) {
					t.Errorf("elected context ended at %v, want by the TimeView expiry %v", tn.Ended, expiry)
				}
				if ousted.IsZero() {
					t.Error("OnOusting not called after the term expired")
				}
				// The store comes back: the candidate campaigns again and,
				// the record being its own expired one, waits out the skew.
				f.hang.Store(false)
				f.failAll.Store(false)
				tn2 := next(r)
				if tn2.Term <= tn.Term {
					t.Errorf("re-elected with term %d, not above %d", tn2.Term, tn.Term)
				}
				if since := tn2.Start.Sub(expiry); since < skew {
					t.Errorf("re-elected %v after the old expiry, want at least MaxClockSkew %v", since, skew)
				}
				stop()
			})
		})
	}
}

// TestSuccessorWaitsForSkewOnOwnClock runs a successor whose clock is ahead
// of or behind the leader's by up to MaxClockSkew and checks it acquires only
// once its own clock passes TermExpiry + MaxClockSkew, and that the two never
// both hold a valid TimeView (checked by the recorder at each election).
func TestSuccessorWaitsForSkewOnOwnClock(t *testing.T) {
	for _, off := range []time.Duration{-skew, -skew / 2, 0, skew / 2, skew} {
		t.Run(off.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.NewDecider()
				leaderStore := &faultyDecider{RaceDecider: mem}
				r := newMonitor(t)
				stopA := runCandidate(t, baseConfig(leaderStore, "a", r, nil))
				a := next(r)
				bClock := skewclock.New(clocks.DefaultClock(), off)
				stopB := runCandidate(t, baseConfig(pushingFaultyDecider{&faultyDecider{RaceDecider: mem}}, "b", r, bClock))
				time.Sleep(term / 3)
				leaderStore.failAll.Store(true) // a is cut off
				b := next(r)
				if b.ID != "b" {
					t.Fatalf("elected %s, want b", b.ID)
				}
				aExpiry := a.TV.Get()
				bNow := bClock.Now().Add(-time.Since(b.Start)) // b's clock at its election
				if !bNow.After(aExpiry.Add(skew)) {
					t.Errorf("b elected at %v on its clock, not after a's expiry %v + skew %v", bNow, aExpiry, skew)
				}
				if late := bNow.Sub(aExpiry.Add(skew)); late > skew {
					t.Errorf("b elected %v after it could have, want well within a term", late)
				}
				stopB()
				stopA()
			})
		})
	}
}

func TestGracefulReleaseHandsOverAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		r := newMonitor(t)
		var order []string
		var mu sync.Mutex
		note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
		cfgA := baseConfig(mem, "a", r, nil)
		inner := cfgA.OnElected
		var tvA *leaderelection.TimeView
		cfgA.OnElected = func(ctx context.Context, tv *leaderelection.TimeView) {
			tvA = tv
			inner(ctx, tv)
			note("a: OnElected returned")
		}
		cfgA.OnOusting = func(context.Context) { note("a: ousted") }
		stopA := runCandidate(t, cfgA)
		a := next(r)
		stopB := runCandidate(t, baseConfig(mem, "b", r, nil))
		stopC := runCandidate(t, baseConfig(mem, "c", r, nil))
		time.Sleep(term / 3)
		released, heldUntil := time.Now(), a.TV.Get()
		stopA()
		if tvA.ValueInFuture() {
			t.Error("TimeView still valid after Acquire released and returned")
		}
		next := next(r)
		if wait := next.Start.Sub(released); wait > skew {
			t.Errorf("successor elected %v after the release, want well under MaxClockSkew (%v)", wait, skew)
		}
		if next.Start.After(heldUntil) {
			t.Errorf("successor waited for the released term to run out")
		}
		if next.Term <= a.Term {
			t.Errorf("successor term %d not above %d", next.Term, a.Term)
		}
		if strings.Join(order, ", ") != "a: OnElected returned, a: ousted" {
			t.Errorf("order of events %q", order)
		}
		stopB()
		stopC()
	})
}

func TestReleaseRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		r := newMonitor(t)
		stop := runCandidate(t, baseConfig(mem, "a", r, nil))
		a := next(r)
		stop()
		rec, err := mem.ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Released || rec.LeaderID != "a" || rec.Term != a.Term {
			t.Errorf("record after shutdown %+v, want released by a with term %d", rec, a.Term)
		}

		// With DisableRelease the term is left to expire.
		mem2 := memory.NewDecider()
		r = newMonitor(t)
		cfg := baseConfig(mem2, "a", r, nil)
		cfg.DisableRelease = true
		stop = runCandidate(t, cfg)
		next(r)
		stop()
		rec, _ = mem2.ReadCurrent(t.Context())
		if rec.Released {
			t.Errorf("DisableRelease: record %+v was released", rec)
		}
	})
}

func TestRejoinAfterLossAndFencingIncreases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		r := newMonitor(t)
		stores := map[string]*faultyDecider{}
		var stops []func()
		for _, id := range []string{"a", "b", "c"} {
			stores[id] = &faultyDecider{RaceDecider: mem}
			stops = append(stops, runCandidate(t, baseConfig(pushingFaultyDecider{stores[id]}, id, r, nil)))
		}
		var terms []int64
		seen := map[string]bool{}
		prev := next(r)
		terms = append(terms, prev.Term)
		for range 6 {
			stores[prev.ID].failAll.Store(true) // cut the leader off
			next := next(r)
			stores[prev.ID].failAll.Store(false) // it comes back and must rejoin
			seen[next.ID] = true
			if next.Term <= prev.Term {
				t.Fatalf("term went from %d to %d", prev.Term, next.Term)
			}
			terms = append(terms, next.Term)
			prev = next
		}
		if len(seen) < 2 {
			t.Errorf("only %v were ever re-elected: cut-off candidates did not rejoin", seen)
		}
		t.Logf("terms: %v", terms)
		for _, s := range stops {
			s()
		}
	})
}

func TestAmbiguousWritesRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		f := &faultyDecider{RaceDecider: mem}
		r := newMonitor(t)
		f.applyThenFail.Store(1) // the acquisition itself
		ousted := 0
		cfg := baseConfig(f, "a", r, nil)
		cfg.OnOusting = func(context.Context) { ousted++ }
		stop := runCandidate(t, cfg)
		a := next(r)
		// Every extension for three terms reports failure although applied.
		f.applyThenFail.Store(6)
		time.Sleep(3 * term)
		synctest.Wait()
		if !a.TV.ValueInFuture() || ousted != 0 {
			t.Errorf("leader stepped down after its own applied writes (valid=%v, ousted %d times)", a.TV.ValueInFuture(), ousted)
		}
		rec, _ := mem.ReadCurrent(t.Context())
		if rec.LeaderID != "a" || rec.Term != a.Term || rec.ElectionNumber < 6 {
			t.Errorf("record %+v: want a's term %d extended at least 6 times", rec, a.Term)
		}
		// A release whose write is ambiguous is recovered too.
		f.applyThenFail.Store(1)
		stop()
		rec, _ = mem.ReadCurrent(t.Context())
		if !rec.Released {
			t.Errorf("ambiguous release not recovered: %+v", rec)
		}
	})
}

func TestLostRaceEndsTenureAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		r := newMonitor(t)
		stop := runCandidate(t, baseConfig(mem, "a", r, nil))
		a := next(r)
		// Someone overwrites the record behind the leader's back.
		rec, _ := mem.ReadCurrent(t.Context())
		rogue := rec.Clone()
		rogue.ElectionNumber++
		rogue.Term = rogue.ElectionNumber
		rogue.LeaderID = "rogue"
		rogue.WriteID = "rogue"
		if _, err := mem.WriteEntry(t.Context(), rogue); err != nil {
			t.Fatal(err)
		}
		time.Sleep(term / 2) // past a's next extension
		synctest.Wait()
		if a.TV.ValueInFuture() || a.Ended.IsZero() {
			t.Errorf("leader still believes it leads after losing the record (valid=%v)", a.TV.ValueInFuture())
		}
		stop()
	})
}

func TestLeaderChangedOncePerTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		r := newMonitor(t)
		stopA := runCandidate(t, baseConfig(mem, "a", r, nil))
		next(r)
		var got []string
		cfgB := baseConfig(mem, "b", r, nil)
		cfgB.LeaderChanged = func(_ context.Context, e entry.RaceEntry) { got = append(got, e.LeaderID) }
		stopB := runCandidate(t, cfgB)
		time.Sleep(3 * term) // several extensions by a
		stopA()              // release: b takes over
		next(r)
		time.Sleep(3 * term)
		synctest.Wait()
		if strings.Join(got, ",") != "a,b" {
			t.Errorf("LeaderChanged saw %q, want a,b", got)
		}
		stopB()
	})
}

func TestHerdElectionCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Requests take a round trip, as on any store: with none, the herd
		// window is empty and which of the woken candidates runs first
		// decides how many write.
		st := newDelayedStore(pollLeg, true)
		r := newMonitor(t)
		const n = 20
		var stores []*faultyDecider
		var stops []func()
		for i := range n {
			f := &faultyDecider{RaceDecider: st.access(string(rune('A' + i)))}
			stores = append(stores, f)
			// Seeded, so that the herd each learns from the start-up is
			// the same every run (a mistaken one is possible, and then
			// the next hand-over costs more writes).
			ctx := hooks.WithRand(t.Context(), rand.New(rand.NewPCG(1, uint64(i))))
			c := racedecidertest.StartCandidate(ctx, baseConfig(pushingFaultyDecider{f}, string(rune('A'+i)), r, nil))
			stops = append(stops, func() { c.Stop(t) })
		}
		first := next(r)
		time.Sleep(term)
		synctest.Wait()
		var reads, writes int64
		for _, f := range stores {
			reads += f.reads.Swap(0)
			writes += f.writes.Swap(0)
		}
		t.Logf("start-up election of %d candidates: %d reads, %d writes (incl. the leader's extensions)", n, reads, writes)
		// Release: the crowd is woken by a push at the same instant.
		idx := int(first.ID[0] - 'A')
		stops[idx]()
		stops[idx] = func() {}
		next(r)
		time.Sleep(skew) // past every candidate's jitter: all have looked
		synctest.Wait()
		reads, writes = 0, 0
		for _, f := range stores {
			reads += f.reads.Load()
			writes += f.writes.Load()
		}
		t.Logf("handover among %d candidates: %d reads, %d writes", n-1, reads, writes)
		// The release, the winner's write and at most a few collisions.
		if writes > 5 {
			t.Errorf("handover among %d candidates cost %d writes: the crowd is not spread out", n-1, writes)
		}
		if reads > n+5 {
			t.Errorf("handover among %d candidates cost %d reads, want about one each", n-1, reads)
		}
		for _, s := range stops {
			s()
		}
	})
}

func TestCorruptRecordStopsAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		mem.SetRaw([]byte("somebody else's object"))
		r := newMonitor(t)
		err := baseConfig(mem, "a", r, nil).Acquire(t.Context())
		if !errors.Is(err, leaderelection.ErrCorruptRecord) {
			t.Fatalf("Acquire on a corrupt record = %v, want ErrCorruptRecord", err)
		}
	})
}

func TestValidate(t *testing.T) {
	ok := leaderelection.Config{
		Decider: memory.NewDecider(), LeaderID: "a", TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond,
		OnElected: func(context.Context, *leaderelection.TimeView) {},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := []struct {
		name  string
		mod   func(c *leaderelection.Config)
		wants []string
	}{
		{"nil decider", func(c *leaderelection.Config) { c.Decider = nil }, []string{"nil Decider"}},
		{"nil OnElected", func(c *leaderelection.Config) { c.OnElected = nil }, []string{"nil OnElected"}},
		{"empty id", func(c *leaderelection.Config) { c.LeaderID = "" }, []string{"empty LeaderID"}},
		// The record would keep them as U+FFFD.
		{"id not UTF-8", func(c *leaderelection.Config) { c.LeaderID = "host-\xff" }, []string{`LeaderID "host-\xff" is not valid UTF-8`}},
		{"address not UTF-8", func(c *leaderelection.Config) { c.HostPort = []string{"a:1", "\xc3:2"} }, []string{`HostPort "\xc3:2" is not valid UTF-8`}},
		{"zero term", func(c *leaderelection.Config) { c.TermLength = 0 }, []string{"TermLength (0s) must be positive"}},
		{"negative term", func(c *leaderelection.Config) { c.TermLength = -time.Second }, []string{"TermLength (-1s)"}},
		{"negative skew", func(c *leaderelection.Config) { c.MaxClockSkew = -time.Millisecond }, []string{"MaxClockSkew (-1ms) must not be negative"}},
		{"term vs skew", func(c *leaderelection.Config) { c.MaxClockSkew = 500 * time.Millisecond },
			[]string{"TermLength (1s) must be greater than 2 x MaxClockSkew (500ms)", "4 x (2s)"}},
		{"negative candidates", func(c *leaderelection.Config) { c.ExpectedCandidates = -2 }, []string{"ExpectedCandidates (-2) must be between 0 and 10000"}},
		{"too many candidates", func(c *leaderelection.Config) { c.ExpectedCandidates = 1 << 40 }, []string{"ExpectedCandidates (1099511627776) must be between 0 and 10000"}},
		{"skew whose double overflows", func(c *leaderelection.Config) { c.MaxClockSkew = math.MaxInt64 / 2 }, []string{"must be greater than 2 x MaxClockSkew"}},
		{"tiny term", func(c *leaderelection.Config) { c.TermLength, c.MaxClockSkew = 100*time.Nanosecond, 0 }, []string{"TermLength (100ns) must be at least 1ms"}},
		{"tiny poll", func(c *leaderelection.Config) { c.PollInterval = time.Millisecond }, []string{"PollInterval (1ms) must be at least TermLength/64 (15.625ms)"}},
		// Schedules span many intervals: past a day they would overflow.
		{"huge term", func(c *leaderelection.Config) { c.TermLength = 25 * time.Hour }, []string{"TermLength (25h0m0s) must be at most 24h0m0s"}},
		{"huge poll", func(c *leaderelection.Config) { c.PollInterval = math.MaxInt64 }, []string{"PollInterval (2562047h47m16.854775807s) must be at most 24h0m0s"}},
		{"several", func(c *leaderelection.Config) { c.Decider = nil; c.LeaderID = "" }, []string{"nil Decider", "empty LeaderID"}},
		// Not nil to a comparison, but the first call would panic.
		{"nil pointer decider", func(c *leaderelection.Config) { c.Decider = (*memory.Decider)(nil) }, []string{"Decider is a nil *memory.Decider"}},
		{"nil pointer observer", func(c *leaderelection.Config) { c.Observer = (*leaderelection.HealthCheck)(nil) },
			[]string{"Observer is a nil *leaderelection.HealthCheck"}},
		{"nil func observer", func(c *leaderelection.Config) { c.Observer = leaderelection.ObserverFunc(nil) },
			[]string{"Observer is a nil leaderelection.ObserverFunc"}},
	}
	if err := (*leaderelection.Config)(nil).Validate(); err == nil {
		t.Error("a nil Config's Validate accepted it")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.mod(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if aerr := cfg.Acquire(t.Context()); aerr == nil || aerr.Error() != err.Error() {
				t.Errorf("Acquire returned %v, want the Validate error", aerr)
			}
		})
	}
}
