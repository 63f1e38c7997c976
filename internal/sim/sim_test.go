package sim

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	flagSeeds   = flag.Int("seeds", 0, "TestSweep: number of seeds to run (0: the quick sweep)")
	flagStart   = flag.Uint64("start", 1, "TestSweep: first seed")
	flagSeed    = flag.Uint64("seed", 0, "TestSweep: run only this seed and print its history")
	flagRepeat  = flag.Int("repeat", 1, "TestSweep with -seed: run the seed this many times and report how often it reproduces")
	flagPar     = flag.Int("par", 0, "TestSweep: seeds run in parallel (0: GOMAXPROCS)")
	flagReports = flag.Int("reports", 3, "TestSweep: failing seeds reported in full")
	flagControl = flag.String("control", "", "TestSweep: run with a negative control's breakage (see controls): offsets, zeroskew, stalestore, unfenced, latetimers, nosleep, ousting, changed, resetfence, nodrain, watchdrop, replay, rlag, rreplay, rfreeze, commitoff, enforceoff, badbackend, samegrid")
)

// controls are the negative controls' breakages, by name.
var controls = map[string]Options{
	"offsets":    {ClockSpread: 3},
	"zeroskew":   {ZeroSkewFollowers: true},
	"stalestore": {StaleWriteProb: 0.5},
	"unfenced":   {Unfenced: true},
	"latetimers": {LateTimers: true},
	"nosleep":    {NoSleep: true},
	"ousting":    {DoubleOusting: true},
	"changed":    {DoubleChanged: true},
	"resetfence": {ResetFencing: true},
	"nodrain":    {GuardNoDrain: true},
	"watchdrop":  {WatchDrop: true},
	"replay":     {WatchReplay: true},
	"rlag":       {ResolverLag: true},
	"rreplay":    {ResolverReplay: true},
	"rfreeze":    {ResolverFreeze: true},
	"commitoff":  {CommitOffset: time.Second},
	"enforceoff": {EnforceIgnored: true},
	"badbackend": {BackendRaceLost: true},
	"samegrid":   {SharedPollGrid: true},
}

// sweepOptions returns the options the flags ask for.
func sweepOptions(t *testing.T) Options {
	o := Options{}
	if *flagControl != "" {
		var ok bool
		if o, ok = controls[*flagControl]; !ok {
			t.Fatalf("unknown -control %q", *flagControl)
		}
	}
	return o
}

// controlSeeds is how many seeds each negative control runs: each must be
// caught in at least one.
const controlSeeds = 40

// quickSeeds is what `go test ./...` runs: a few hundred seeds.
const quickSeeds = 300

func rerunCommand(seed uint64) string {
	cmd := fmt.Sprintf("go test ./internal/sim/ -run 'TestSweep$' -seed %d -v", seed)
	if *flagControl != "" {
		cmd += " -control " + *flagControl
	}
	return cmd
}

// TestSweep runs the real engine on many seeds and fails on any broken
// invariant, printing the failing seed's history and the command to rerun
// it. Flags: -seeds, -start, -seed, -repeat, -par.
func TestSweep(t *testing.T) {
	if *flagSeed != 0 {
		replay(t, *flagSeed, *flagRepeat)
		return
	}
	n := *flagSeeds
	if n == 0 {
		n = quickSeeds
		if testing.Short() {
			n = quickSeeds / 5
		}
	}
	par := *flagPar
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	opts := sweepOptions(t)
	began := time.Now()
	var (
		mu      sync.Mutex
		total   Stats
		failed  []uint64
		next    = *flagStart
		last    = *flagStart + uint64(n)
		done    int
		reports int
	)
	t.Run("workers", func(t *testing.T) {
		for w := range par {
			t.Run(fmt.Sprint(w), func(t *testing.T) {
				t.Parallel()
				for {
					mu.Lock()
					seed := next
					next++
					mu.Unlock()
					if seed >= last {
						return
					}
					res := Run(t, seed, opts)
					mu.Lock()
					total.Add(res.Stats)
					done++
					if done%1000 == 0 {
						t.Logf("%d seeds run in %v, %d failed so far", done, time.Since(began).Round(time.Second), len(failed))
					}
					if res.Failed() {
						failed = append(failed, seed)
						if reports < *flagReports {
							reports++
							t.Errorf("seed %d broke an invariant; rerun with:\n  %s\n%s", seed, rerunCommand(seed), res.Report(150, 20))
						} else {
							t.Errorf("seed %d broke an invariant: %s (rerun: %s)", seed, res.Violations[0], rerunCommand(seed))
						}
					}
					mu.Unlock()
				}
			})
		}
	})
	t.Logf("sweep of seeds %d..%d in %v on %d workers:\n%s", *flagStart, last-1, time.Since(began).Round(time.Millisecond), par, total.String())
	if len(failed) > 0 {
		t.Logf("failing seeds: %v", failed)
	}
	// The pause faults must really produce the case only fencing covers,
	// or the fencing checks prove nothing.
	if n >= quickSeeds/5 && total.Fenced == 0 {
		t.Errorf("no stale action ever reached the downstream: the worker pauses do not exercise fencing")
	}
}

// replay runs one seed, repeat times, prints its history, and reports how
// reproducible it is: how many runs broke an invariant and how many distinct
// histories the runs took.
func replay(t *testing.T, seed uint64, repeat int) {
	var first *Result
	failures := 0
	digests := map[uint64]int{}
	opts := sweepOptions(t)
	for range max(repeat, 1) {
		res := Run(t, seed, opts)
		if first == nil {
			first = res
		}
		if res.Failed() {
			failures++
		}
		digests[res.Digest]++
	}
	t.Logf("%s", first.Report(len(first.History), len(first.History)))
	t.Logf("stats:\n%s", first.Stats.String())
	if repeat > 1 {
		t.Logf("seed %d run %d times: %d broke an invariant; %d distinct histories", seed, repeat, failures, len(digests))
	}
	if failures > 0 {
		t.Errorf("seed %d broke an invariant in %d of %d runs", seed, failures, max(repeat, 1))
	}
}

// negativeControl runs seeds 1..seeds with a breakage, and fails unless at
// least one breaks an invariant of kind: a checker that cannot fail is a
// defect. It logs how many seeds caught it.
func negativeControl(t *testing.T, control, kind string, seeds int) {
	t.Helper()
	o := controls[control]
	caught := 0
	var first *Result
	ran := 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		ran++
		res := Run(t, seed, o)
		if !res.Has(kind) {
			continue
		}
		caught++
		if first == nil {
			first = res
			if testing.Short() || !testing.Verbose() {
				// Counting every catch is for -v; the CI run stops at
				// the first.
				break
			}
		}
	}
	if first == nil {
		t.Fatalf("no %s violation in %d seeds: the checker cannot see this breakage", kind, seeds)
	}
	// The failing seed must fail again, the same way.
	again := Run(t, first.Scenario.Seed, o)
	if d := firstDifference(first, again); d != "" {
		t.Errorf("failing seed %d did not reproduce: %s", first.Scenario.Seed, d)
	}
	for _, v := range first.Violations {
		if v.Kind == kind {
			t.Logf("caught in %d of the %d seeds run (of %d); first: seed %d: %s\n  rerun: go test ./internal/sim/ -run 'TestSweep$' -seed %d -control %s -v",
				caught, ran, seeds, first.Scenario.Seed, v, first.Scenario.Seed, control)
			break
		}
	}
	if testing.Verbose() {
		t.Logf("%s", first.Report(40, 3))
	}
}

// TestNegativeControls proves the checker can fail: each breakage must be
// caught within a bounded number of seeds.
func TestNegativeControls(t *testing.T) {
	t.Run("clock offsets beyond MaxClockSkew", func(t *testing.T) {
		negativeControl(t, "offsets", "mutual-exclusion", controlSeeds)
	})
	t.Run("followers configured with MaxClockSkew 0", func(t *testing.T) {
		// About one seed in seven shows two leaders (most show only a
		// premature takeover), and which ones moves with the engine's
		// schedule: more seeds, so that the control does not hang on
		// one.
		negativeControl(t, "zeroskew", "mutual-exclusion", 3*controlSeeds)
	})
	t.Run("store accepting writes on stale tokens", func(t *testing.T) {
		negativeControl(t, "stalestore", "mutual-exclusion", controlSeeds)
	})
	t.Run("downstream without fencing", func(t *testing.T) {
		negativeControl(t, "unfenced", "fencing-downstream", controlSeeds)
	})
	t.Run("engine timers firing late", func(t *testing.T) {
		negativeControl(t, "latetimers", "elected-context-late", controlSeeds)
	})
	t.Run("retries without backoff", func(t *testing.T) {
		negativeControl(t, "nosleep", "cost", controlSeeds)
	})
	t.Run("OnOusting called twice", func(t *testing.T) {
		negativeControl(t, "ousting", "ousting", controlSeeds)
	})
	t.Run("LeaderChanged called twice", func(t *testing.T) {
		negativeControl(t, "changed", "leader-changed", controlSeeds)
	})
	t.Run("store resetting fencing on deletion", func(t *testing.T) {
		negativeControl(t, "resetfence", "fencing", controlSeeds)
	})
	t.Run("Guard not draining admitted calls", func(t *testing.T) {
		negativeControl(t, "nodrain", "release-under-call", controlSeeds)
	})
	t.Run("Watch dropping reports", func(t *testing.T) {
		negativeControl(t, "watchdrop", "watch-missed", controlSeeds)
	})
	t.Run("Watch replaying reports", func(t *testing.T) {
		negativeControl(t, "replay", "watch-order", controlSeeds)
	})
	t.Run("resolver on a clock half a term behind", func(t *testing.T) {
		negativeControl(t, "rlag", "resolver-ended-term", controlSeeds)
	})
	t.Run("resolver replaying the previous leader", func(t *testing.T) {
		negativeControl(t, "rreplay", "resolver-order", controlSeeds)
	})
	t.Run("resolver freezing once faults end", func(t *testing.T) {
		negativeControl(t, "rfreeze", "resolver-stale", controlSeeds)
	})
	t.Run("store reporting commit times a second late", func(t *testing.T) {
		negativeControl(t, "commitoff", "clock-offset", controlSeeds)
	})
	t.Run("EnforceMaxClockSkew ignored", func(t *testing.T) {
		negativeControl(t, "enforceoff", "clock-skew-enforced", controlSeeds)
	})
	t.Run("cloud backend taking unknown outcomes for lost races", func(t *testing.T) {
		negativeControl(t, "badbackend", "backend-misclassified", controlSeeds)
	})
	t.Run("pollers sharing one poll grid", func(t *testing.T) {
		negativeControl(t, "samegrid", "polls-in-step", controlSeeds)
	})
}

// replaySeeds is how many ordinary seeds TestReplay runs twice.
const replaySeeds = 25

// TestReplay checks that a seed fixes the whole course of a run: two runs
// of each seed record the same events at the same virtual instants.
func TestReplay(t *testing.T) {
	n := replaySeeds
	if testing.Short() {
		n = 5
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		a, b := Run(t, seed, Options{}), Run(t, seed, Options{})
		if d := firstDifference(a, b); d != "" {
			t.Errorf("seed %d took two courses: %s", seed, d)
		}
	}
}

// firstDifference describes the first virtual instant at which two runs'
// histories differ, or returns "" if they took the same course. Events at
// one instant may be recorded in any order (see digest).
func firstDifference(a, b *Result) string {
	if a.Digest == b.Digest && len(a.History) == len(b.History) {
		return ""
	}
	at := func(h []Event, i int) time.Duration {
		if i < len(h) {
			return h[i].At
		}
		return -1
	}
	group := func(h []Event, from int) ([]string, int) {
		var out []string
		i := from
		for ; i < len(h) && h[i].At == h[from].At; i++ {
			out = append(out, h[i].String())
		}
		slices.Sort(out)
		return out, i
	}
	for i, j := 0, 0; i < len(a.History) || j < len(b.History); {
		if at(a.History, i) != at(b.History, j) || i >= len(a.History) || j >= len(b.History) {
			return fmt.Sprintf("one run has an event at %v, the other at %v", at(a.History, i), at(b.History, j))
		}
		ga, ni := group(a.History, i)
		gb, nj := group(b.History, j)
		if !slices.Equal(ga, gb) {
			return fmt.Sprintf("at %v, one run recorded\n  %s\nthe other\n  %s", a.History[i].At,
				strings.Join(ga, "\n  "), strings.Join(gb, "\n  "))
		}
		i, j = ni, nj
	}
	return "the histories' digests differ"
}

// TestFirstDifference checks the replay comparison itself: events at one
// instant in another order are the same course; anything else is not.
func TestFirstDifference(t *testing.T) {
	mk := func(evs ...Event) *Result { return &Result{History: evs, Digest: digest(evs)} }
	a := Event{At: 1, Who: "c0.1", What: "sends"}
	b := Event{At: 1, Who: "c1.1", What: "reads"}
	c := Event{At: 2, Who: "store", What: "applies"}
	if d := firstDifference(mk(a, b, c), mk(b, a, c)); d != "" {
		t.Errorf("same events at one instant, reordered: %s", d)
	}
	later := c
	later.At = 3
	for name, other := range map[string]*Result{
		"an event changed":  mk(a, Event{At: 1, Who: "c1.1", What: "writes"}, c),
		"an event missing":  mk(a, b),
		"an event moved":    mk(a, b, later),
		"an instant merged": mk(a, b, Event{At: 1, Who: "store", What: "applies"}),
	} {
		if firstDifference(mk(a, b, c), other) == "" {
			t.Errorf("%s: no difference found", name)
		}
	}
}

// TestCostAfterASlowWrite: in seed 7007720 (found by a 20,000-seed sweep) the
// leader's acquiring write took 428 ms of a 500 ms term just before the faults
// ended, so that it extended every quarter term through the quiet phase, as
// the engine does after a slow write among its last 8 (extendAt); the cost
// check took that for a leader writing too often, as it allowed for it only
// after a slow-store phase. In seed 8205780 the same early extensions were
// pushed to a waiting candidate, whose change waits the check allowed only
// for its own slow writes.
func TestCostAfterASlowWrite(t *testing.T) {
	for _, seed := range []uint64{7007720, 8205780} {
		if res := Run(t, seed, Options{}); res.Failed() {
			t.Errorf("seed %d: %s", seed, res.Report(3, 40))
		}
	}
}

// TestWatchersReadTogetherAtTermEnd: in seed 8201556 (push, MaxClockSkew 0)
// a watcher and a resolver read at the same instant at each of 34 term ends,
// as both read when the term of the record they follow ends; the polls-in-
// step check took those reads for polls on one grid.
func TestWatchersReadTogetherAtTermEnd(t *testing.T) {
	if res := Run(t, 8201556, Options{}); res.Failed() {
		t.Errorf("%s", res.Report(3, 40))
	}
}

// TestRefusalGivenUp: in seed 8401942 a candidate on a GCS backend was
// refused during a slow-store phase, but each refusal came after its read
// had timed out (or, as a download's 404, needed the bucket check that then
// timed out): the engine never saw one, and rightly retried. The check
// counted the refusal as delivered when the store made it; it now counts it
// when it reaches the engine.
func TestRefusalGivenUp(t *testing.T) {
	if res := Run(t, 8401942, Options{}); res.Failed() {
		t.Errorf("%s", res.Report(3, 40))
	}
}

// TestResolverEnderKeepsANewerRead: in seed 8702335 the resolver's own read
// at a term's expiry was served the leader's release, just after its watcher
// had brought the extension before it; the resolver dropped the release, as
// the record it had read for had changed, and routed to the former leader
// until the watcher's next poll.
func TestResolverEnderKeepsANewerRead(t *testing.T) {
	if res := Run(t, 8702335, Options{}); res.Failed() {
		t.Errorf("%s", res.Report(3, 40))
	}
}

// TestReapedProcessReportsNoOffset: in seed 8701021 a candidate crashed while
// stalled between a write and its clock-offset report; reaped at shutdown,
// 140 s later, it sent the bound it had computed before the crash, and the
// offset check judged that bound against the last 56 s of a drifting clock.
// What a reaped process does on its way out is not part of the run.
func TestReapedProcessReportsNoOffset(t *testing.T) {
	if res := Run(t, 8701021, Options{}); res.Failed() {
		t.Errorf("%s", res.Report(3, 40))
	}
}
