package leaderelection_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/hooks"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// pollRun is what a run of polled hand-overs showed.
type pollRun struct {
	// firstRead is, per hand-over, how long after the release reached the
	// store the first waiting candidate's read was sent.
	firstRead []time.Duration
	// readsPerTerm is the reads of each waiting candidate per TermLength
	// while it waited.
	readsPerTerm []float64
	// inStep counts pairs of reads by two candidates within a millisecond
	// of each other, three times in a row.
	inStep int
}

const (
	pollTerm = 2 * time.Second
	pollLeg  = 2500 * time.Microsecond
)

// runPolled starts waiting+1 candidates together on a store that cannot push
// changes (so that their polls start in step, as after a deploy or a
// takeover), and stops the leader a random while later (within 2 poll
// intervals of the first election, or after 4 terms with steady). It returns
// how long after the release reached the store the first waiting candidate's
// read was sent, each waiting candidate's reads per term from a term after the
// election to the stop, and how often two candidates read in step.
// Candidates draw from seeded sources, so that a run can be replayed.
func runPolled(t *testing.T, waiting int, legacy, steady bool, seed uint64) pollRun {
	var res pollRun
	synctest.Test(t, func(t *testing.T) {
		st := newDelayedStore(pollLeg, false)
		mon := newMonitor(t)
		cands := map[string]*racedecidertest.Candidate{}
		for i := range waiting + 1 {
			id := "c" + itoa(i)
			ctx := hooks.WithRand(t.Context(), rand.New(rand.NewPCG(seed, uint64(i))))
			if legacy {
				ctx = hooks.WithLegacyScheduling(ctx)
			}
			cands[id] = racedecidertest.StartCandidate(ctx, leaderelection.Config{
				Decider: st.access(id), LeaderID: id, OnElected: mon.OnElected(id),
				TermLength: pollTerm, MaxClockSkew: 100 * time.Millisecond,
			})
		}
		tn := next(mon)
		r := rand.New(rand.NewPCG(seed, 99))
		wait := time.Duration(r.Int64N(int64(pollTerm / 2)))
		if steady {
			wait += 4 * pollTerm
		}
		time.Sleep(wait)
		stopAt := time.Now()
		done := make(chan struct{})
		go func() { cands[tn.ID].Stop(t); close(done) }()
		nx := next(mon)
		<-done
		_, writes := st.between(stopAt, nx.Start)
		if len(writes) == 0 {
			t.Fatalf("no release written")
		}
		// The release reaches the store a leg after it is sent, as does a
		// read: a read sent after the release sees it, a leg later.
		reads, _ := st.between(writes[0].at, nx.Start)
		if len(reads) == 0 {
			t.Fatalf("hand-over without a read")
		}
		res.firstRead = append(res.firstRead, reads[0].at.Sub(writes[0].at))
		from := tn.Start.Add(pollTerm)
		waited, _ := st.between(tn.Start, stopAt)
		per := map[string][]time.Time{}
		for _, o := range waited {
			if o.who != tn.ID {
				per[o.who] = append(per[o.who], o.at)
			}
		}
		res.inStep += countInStep(per)
		if steady {
			for _, ts := range per {
				n := 0
				for _, at := range ts {
					if !at.Before(from) {
						n++
					}
				}
				res.readsPerTerm = append(res.readsPerTerm, float64(n)*float64(pollTerm)/float64(stopAt.Sub(from)))
			}
		}
		for id, c := range cands {
			if id != tn.ID {
				c.Stop(t)
			}
		}
	})
	return res
}

// countInStep counts the times two candidates read within a millisecond of
// each other for the third time in a row.
func countInStep(per map[string][]time.Time) int {
	var ids []string
	for id := range per {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	n := 0
	for i, a := range ids {
		for _, b := range ids[:i] {
			run := 0
			for _, ta := range per[a] {
				near := false
				for _, tb := range per[b] {
					if d := ta.Sub(tb); d < time.Millisecond && d > -time.Millisecond {
						near = true
					}
				}
				if !near {
					run = 0
					continue
				}
				if run++; run == 3 {
					n++
				}
			}
		}
	}
	return n
}

func meanDuration(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(max(len(ds), 1))
}

func meanFloat(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// Waiting candidates started together poll on independent phases at once,
// never in step, and read less often than the schedule they replace, whose
// polls stay bunched for many intervals after a common start: the first read
// after a release comes sooner (figures in the log; timings are not
// asserted).
func TestPolledWaitersSpreadTheirReads(t *testing.T) {
	for _, waiting := range []int{2, 4} {
		var now, old, nowSteady, oldSteady pollRun
		for seed := range uint64(24) {
			now.add(runPolled(t, waiting, false, false, seed))
			old.add(runPolled(t, waiting, true, false, seed))
		}
		for seed := range uint64(6) {
			nowSteady.add(runPolled(t, waiting, false, true, seed))
			oldSteady.add(runPolled(t, waiting, true, true, seed))
		}
		t.Logf("%d waiting, PollInterval %v, released within a second of a common start: first read after it mean %v median %v (legacy: mean %v median %v); in step %d (legacy %d)",
			waiting, pollTerm/4, meanDuration(now.firstRead), median(now.firstRead), meanDuration(old.firstRead), median(old.firstRead), now.inStep, old.inStep)
		t.Logf("%d waiting, after 4 terms: first read mean %v (legacy %v); reads per term per waiting candidate %.2f (legacy %.2f)",
			waiting, meanDuration(nowSteady.firstRead), meanDuration(oldSteady.firstRead), meanFloat(nowSteady.readsPerTerm), meanFloat(oldSteady.readsPerTerm))
		if now.inStep+nowSteady.inStep > 0 {
			t.Errorf("%d waiting: two candidates polled in step %d times", waiting, now.inStep+nowSteady.inStep)
		}
		// At most 1.14 reads per PollInterval, 4 per term at the default.
		if got := meanFloat(nowSteady.readsPerTerm); got > 4*8.0/7 {
			t.Errorf("%d waiting: %.2f reads per term, want at most %.2f", waiting, got, 4*8.0/7)
		}
	}
}

func (r *pollRun) add(o pollRun) {
	r.firstRead = append(r.firstRead, o.firstRead...)
	r.readsPerTerm = append(r.readsPerTerm, o.readsPerTerm...)
	r.inStep += o.inStep
}

// Watchers started together (the clients of one deploy) read on independent
// phases, never in step as the schedule they replace does, at no more than
// PollInterval x 16/15 per read. (A single watcher's lag behind a change is
// half a poll interval on average either way: what phasing changes is how
// soon the first of several reads, and that their reads do not bunch.)
func TestWatchersStartedTogetherDoNotPollInStep(t *testing.T) {
	const watchers, poll = 4, 500 * time.Millisecond
	run := func(legacy bool) (inStep int, readsPerPoll float64) {
		synctest.Test(t, func(t *testing.T) {
			st := newDelayedStore(pollLeg, false)
			mon := newMonitor(t)
			leader := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
				Decider: st.access("leader"), LeaderID: "leader", OnElected: mon.OnElected("leader"),
				TermLength: pollTerm, MaxClockSkew: 100 * time.Millisecond,
			})
			start := time.Now()
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			for i := range watchers {
				wctx := hooks.WithRand(ctx, rand.New(rand.NewPCG(7, uint64(i))))
				if legacy {
					wctx = hooks.WithLegacyScheduling(wctx)
				}
				w := leaderelection.WatchConfig{Decider: st.access("w" + itoa(i)), PollInterval: poll, MaxClockSkew: 100 * time.Millisecond}
				wg.Go(func() { _ = w.Watch(wctx, func(context.Context, leaderelection.Change) {}) })
			}
			time.Sleep(10 * pollTerm)
			cancel()
			wg.Wait()
			leader.Stop(t)
			reads, _ := st.between(start, time.Now())
			per := map[string][]time.Time{}
			n := 0
			for _, o := range reads {
				if o.who != "leader" {
					per[o.who] = append(per[o.who], o.at)
					n++
				}
			}
			inStep = countInStep(per)
			readsPerPoll = float64(n) / watchers / float64(10*pollTerm/poll)
		})
		return inStep, readsPerPoll
	}
	inStep, perPoll := run(false)
	oldInStep, oldPerPoll := run(true)
	t.Logf("%d watchers started together: in step %d times (legacy %d); reads per PollInterval %.3f (legacy %.3f)", watchers, inStep, oldInStep, perPoll, oldPerPoll)
	if oldInStep == 0 {
		t.Fatalf("the legacy schedule never read in step: this test no longer shows what it checks")
	}
	if inStep > 0 {
		t.Errorf("watchers read in step %d times", inStep)
	}
	if perPoll > 16.0/15+0.05 {
		t.Errorf("%.3f reads per PollInterval per watcher, want at most 16/15", perPoll)
	}
}
