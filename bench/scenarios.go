package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
)

// scenario is one measurement, run on one backend.
type scenario struct {
	name string
	run  func(ctx context.Context, s *settings, b *backend) ([]Metric, error)
}

// The scenarios, in the order they run.
var scenarios = []scenario{
	{"handover", runHandover},
	{"failover", runFailover},
	{"steady", runSteady},
	{"observer", runObserver},
	{"pause", runPause},
	{"herd", runHerd},
}

// patience bounds every wait for an election or a report.
func (s *settings) patience() time.Duration { return 4*s.term + 4*s.skew + 2*time.Second }

// candidatePoll is the PollInterval candidates use.
func (s *settings) candidatePoll() time.Duration {
	if s.poll > 0 {
		return s.poll
	}
	return s.term / 4
}

// repeat runs fn n times, at most parallel at once, each on its own election,
// and returns the results in order. It stops at the first error.
func repeat[T any](ctx context.Context, n, parallel int, fn func(ctx context.Context) (T, error)) ([]T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]T, n)
	errs := make([]error, n)
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			out[i], errs[i] = fn(ctx)
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	return out, errors.Join(errs...)
}

// withCluster runs fn on a new election and closes it afterwards.
func withCluster[T any](ctx context.Context, s *settings, b *backend, fn func(c *cluster) (T, error)) (T, error) {
	c, err := newCluster(ctx, s, b)
	if err != nil {
		var zero T
		return zero, err
	}
	res, err := fn(c)
	return res, errors.Join(err, c.close())
}

// handOver stops leader's candidate and returns the next tenure and when the
// stop began.
func handOver(ctx context.Context, s *settings, c *cluster, leader *tenure) (*tenure, time.Time, error) {
	// The leader may have lost its term since (a loaded machine, a short
	// term): stop whoever was elected last.
	leader = c.rec.latest(leader)
	cd := c.candidate(leader.id)
	if cd == nil {
		return nil, time.Time{}, fmt.Errorf("leader %s is not a running candidate", leader.id)
	}
	stopped := make(chan error, 1)
	t0 := time.Now()
	go func() { stopped <- c.stop(cd) }()
	next, err := c.rec.next(ctx, s.patience())
	// Skip elections from before the stop, queued since the last look.
	for err == nil && next.start.Before(t0) {
		next, err = c.rec.next(ctx, s.patience())
	}
	return next, t0, errors.Join(err, <-stopped)
}

// handOvers repeats s.reps times, from leader tn: wait a random part of the
// renewal cycle, cancel the leader, call each with the successor and the
// cancel time, and start a new candidate in the cancelled one's place.
func handOvers(ctx context.Context, s *settings, c *cluster, tn *tenure, each func(next *tenure, t0 time.Time) error) error {
	for range s.reps {
		if err := sleep(ctx, uniform(s.term/8, s.term/2)); err != nil {
			return err
		}
		next, t0, err := handOver(ctx, s, c, tn)
		if err != nil {
			return err
		}
		if err := each(next, t0); err != nil {
			return err
		}
		c.start()
		tn = next
	}
	return nil
}

// runHandover: 3 candidates; the leader's Acquire context is cancelled at a
// random point of its renewal cycle. Time from the cancel to the next
// OnElected.
func runHandover(ctx context.Context, s *settings, b *backend) ([]Metric, error) {
	samples, err := handoverSamples(ctx, s, b)
	if err != nil {
		return nil, err
	}
	m := metric("handover", "cancel to next OnElected", "ms", msStat(samples))
	if b.push {
		m = m.withTarget("median <= 25 ms", m.Median <= 25)
	} else {
		rtt := b.rtt.median()
		limit := s.candidatePoll() + 3*rtt
		m = m.withTarget(fmt.Sprintf("median <= poll + 3 RTT = %.0f ms", ms(limit)), m.Median <= ms(limit))
	}
	return []Metric{m}, nil
}

// handoverSamples runs the handover scenario and returns the time from each
// cancel to the next OnElected.
func handoverSamples(ctx context.Context, s *settings, b *backend) ([]time.Duration, error) {
	return withCluster(ctx, s, b, func(c *cluster) ([]time.Duration, error) {
		c.startN(3)
		tn, err := c.rec.next(ctx, s.patience())
		if err != nil {
			return nil, err
		}
		var out []time.Duration
		err = handOvers(ctx, s, c, tn, func(next *tenure, t0 time.Time) error {
			out = append(out, next.start.Sub(t0))
			return nil
		})
		return out, err
	})
}

type failoverSample struct {
	sinceCut, overhead time.Duration
}

// runFailover: 3 candidates; the leader's store access is cut at a random
// point of its renewal cycle and it is abandoned. Time from the cut to the
// next OnElected, and from the safety floor (its last accepted TermExpiry +
// MaxClockSkew) to the next OnElected.
func runFailover(ctx context.Context, s *settings, b *backend) ([]Metric, error) {
	samples, err := failoverSamples(ctx, s, b)
	if err != nil {
		return nil, err
	}
	var since, over []time.Duration
	for _, x := range samples {
		since = append(since, x.sinceCut)
		over = append(over, x.overhead)
	}
	mo := metric("failover", "overhead beyond TermExpiry+MaxClockSkew", "ms", msStat(over))
	limit := s.term / 50
	mo = mo.withTarget(fmt.Sprintf("median <= 2%% of term = %.0f ms", ms(limit)), mo.Median <= ms(limit))
	if mo.Min < 0 {
		mo = mo.withNote(fmt.Sprintf("SAFETY: a successor was elected %.1f ms before the floor", -mo.Min))
	}
	return []Metric{
		metric("failover", "cut to next OnElected", "ms", msStat(since)),
		mo,
	}, nil
}

// failoverSamples runs the failover scenario.
func failoverSamples(ctx context.Context, s *settings, b *backend) ([]failoverSample, error) {
	return repeat(ctx, s.reps, s.parallel, func(ctx context.Context) (failoverSample, error) {
		return withCluster(ctx, s, b, func(c *cluster) (failoverSample, error) {
			c.startN(3)
			tn, err := c.rec.next(ctx, s.patience())
			if err != nil {
				return failoverSample{}, err
			}
			if err := sleep(ctx, uniform(0, s.term/2)); err != nil {
				return failoverSample{}, err
			}
			old := c.candidate(tn.id)
			old.acc.cut(cutDrop)
			cutAt := time.Now()
			next, err := c.rec.next(ctx, s.patience())
			if err != nil {
				return failoverSample{}, err
			}
			last := old.acc.lastAccepted()
			floor := last.TermExpiry.Add(s.skew)
			return failoverSample{sinceCut: next.start.Sub(cutAt), overhead: next.start.Sub(floor)}, nil
		})
	})
}

// runSteady: 1 leader, 4 followers and 2 watchers for SteadyTerms terms:
// requests per term per role, and per hour at the default 15 s term.
func runSteady(ctx context.Context, s *settings, b *backend) ([]Metric, error) {
	r, err := steadyCounts(ctx, s, b)
	if err != nil {
		return nil, err
	}
	return steadyMetrics(s, b, r), nil
}

// steadyResult is the traffic of one steady-state window, by role.
type steadyResult struct {
	leader    opCounts
	followers []opCounts
	watchers  []opCounts
	terms     float64
}

// steadyCounts runs the steady scenario: 5 candidates and 2 watchers.
func steadyCounts(ctx context.Context, s *settings, b *backend) (steadyResult, error) {
	type result = steadyResult
	return withCluster(ctx, s, b, func(c *cluster) (result, error) {
		c.startN(5)
		ws := []*watcher{c.watch("watcher-1"), c.watch("watcher-2")}
		tn, err := c.rec.next(ctx, s.patience())
		if err != nil {
			return result{}, err
		}
		// Past start-up, and midway between two extensions (the leader
		// extends every half term), so that the window holds a whole
		// number of them.
		if err := sleep(ctx, time.Until(tn.start.Add(s.term+s.term/4))); err != nil {
			return result{}, err
		}
		leader := c.candidate(tn.id)
		followers := c.others(tn.id)
		snap := func() (l opCounts, f, w []opCounts) {
			l = leader.acc.counts()
			for _, cd := range followers {
				f = append(f, cd.acc.counts())
			}
			for _, x := range ws {
				w = append(w, x.acc.counts())
			}
			return l, f, w
		}
		l0, f0, w0 := snap()
		t0 := time.Now()
		if err := sleep(ctx, time.Duration(s.steadyTerms)*s.term); err != nil {
			return result{}, err
		}
		l1, f1, w1 := snap()
		elapsed := time.Since(t0)
		c.rec.mu.Lock()
		n := len(c.rec.tenures)
		c.rec.mu.Unlock()
		if n != 1 {
			return result{}, fmt.Errorf("steady state: %d tenures, want the leader to keep its term", n)
		}
		res := result{leader: l1.sub(l0), terms: float64(elapsed) / float64(s.term)}
		for i := range f1 {
			res.followers = append(res.followers, f1[i].sub(f0[i]))
		}
		for i := range w1 {
			res.watchers = append(res.watchers, w1[i].sub(w0[i]))
		}
		return res, nil
	})
}

func steadyMetrics(s *settings, b *backend, r steadyResult) []Metric {
	per := func(n int64) float64 { return float64(n) / r.terms }
	var fOps, fWaits, wReads []float64
	total := per(r.leader.reads + r.leader.writes)
	for _, f := range r.followers {
		fOps = append(fOps, per(f.reads+f.writes))
		fWaits = append(fWaits, per(f.waits))
		total += per(f.reads + f.writes)
	}
	for _, w := range r.watchers {
		wReads = append(wReads, per(w.reads+w.writes))
	}
	ratio := float64(s.term) / float64(s.candidatePoll())
	wratio := float64(s.term) / float64(s.watchPoll)
	termsPerHour := float64(time.Hour) / float64(leaderelection.DefaultTermLength)

	leaderW := metric("steady", "leader writes per term", "ops", statOf([]float64{per(r.leader.writes)}))
	leaderW = leaderW.withTarget("<= 2", leaderW.Max <= 2.01)
	leaderR := metric("steady", "leader reads per term", "ops", statOf([]float64{per(r.leader.reads)}))
	fm := metric("steady", "follower requests per term", "ops", statOf(fOps))
	tm := metric("steady", "5 candidates requests per term", "ops", statOf([]float64{total}))
	wm := metric("steady", "watcher requests per term", "ops", statOf(wReads))
	if b.push {
		fm = fm.withTarget("<= 1 (push)", fm.Max <= 1)
		tm = tm.withTarget("<= 8", tm.Max <= 8)
		wm = wm.withNote("push: 0 expected")
	} else {
		doc := ratio + 1
		fm = fm.withTarget(fmt.Sprintf("<= T/P+1 = %.0f (polling)", doc), fm.Max <= doc+0.05)
		tm = tm.withTarget(fmt.Sprintf("<= 2+4(T/P+1) = %.0f (polling; 8 needs push)", 2+4*doc), tm.Max <= 2+4*doc+0.05)
		wm = wm.withNote(fmt.Sprintf("polling: T/Pw = %.0f expected", wratio))
	}
	out := []Metric{leaderW, leaderR, fm}
	if b.push {
		out = append(out, metric("steady", "follower push waits per term", "waits", statOf(fWaits)).
			withNote("WaitForChange calls: notifications received, not requests"))
	}
	out = append(out, tm, wm)

	// Per hour at the default 15 s term: the election's schedule depends on
	// ratios only (PollInterval = TermLength/4 by default, and the watcher
	// poll scaled like the default 1 s : 15 s), so per-term counts carry over.
	hourly := func(name string, perTerm float64) Metric {
		return metric("steady", name, "req/h", statOf([]float64{perTerm * termsPerHour}))
	}
	fMed := statOf(fOps).Median
	wMed := statOf(wReads).Median
	note := fmt.Sprintf("per-term counts x %.0f terms/h; bench ratios T/P=%.1f, T/Pw=%.1f (defaults 4, 15)", termsPerHour, ratio, wratio)
	out = append(out,
		hourly("leader requests/h @15s term", per(r.leader.reads+r.leader.writes)),
		hourly("follower requests/h @15s term", fMed),
		hourly("watcher requests/h @15s term", wMed),
		hourly("1+4 candidates + 2 watchers requests/h @15s", total+2*wMed).withNote(note),
	)
	return out
}

type observerSample struct {
	earlyTold    bool
	earlyLag     time.Duration
	handoverLags []time.Duration
}

// runObserver: a watcher started before any election and one started after;
// time from each new leader's OnElected to the watcher's callback.
func runObserver(ctx context.Context, s *settings, b *backend) ([]Metric, error) {
	samples, err := observerSamples(ctx, s, b, 1)
	if err != nil {
		return nil, err
	}
	return observerMetrics(s, b, samples), nil
}

// observerSamples runs the observer scenario, parallel elections at once.
func observerSamples(ctx context.Context, s *settings, b *backend, parallel int) ([]observerSample, error) {
	return repeat(ctx, s.reps, parallel, func(ctx context.Context) (observerSample, error) {
		return withCluster(ctx, s, b, func(c *cluster) (observerSample, error) {
			var res observerSample
			early := c.watch("early")
			// A random part of a watcher poll more, so that the first
			// election does not fall at one place in the early
			// watcher's schedule, as it would if the watcher polled a
			// fixed while after its start.
			if err := sleep(ctx, max(s.term/20, 4*b.latency)+uniform(0, s.watchPoll)); err != nil {
				return res, err
			}
			c.startN(3)
			first, err := c.rec.next(ctx, s.patience())
			if err != nil {
				return res, err
			}
			at, ok := early.electedAt(ctx, first.term, s.patience())
			res.earlyTold = ok
			if ok {
				res.earlyLag = at.Sub(first.start)
			}
			late := c.watch("late")
			if err := sleep(ctx, uniform(s.term/8, s.term/2)); err != nil {
				return res, err
			}
			next, _, err := handOver(ctx, s, c, first)
			if err != nil {
				return res, err
			}
			for _, w := range []*watcher{early, late} {
				at, ok := w.electedAt(ctx, next.term, s.patience())
				if !ok {
					return res, fmt.Errorf("watcher was not told of term %d within %v", next.term, s.patience())
				}
				res.handoverLags = append(res.handoverLags, at.Sub(next.start))
			}
			return res, nil
		})
	})
}

func observerMetrics(s *settings, b *backend, samples []observerSample) []Metric {
	var all, early []time.Duration
	told := 0
	for _, x := range samples {
		if x.earlyTold {
			told++
			early = append(early, x.earlyLag)
			all = append(all, x.earlyLag)
		}
		all = append(all, x.handoverLags...)
	}
	m := metric("observer", "OnElected to watcher callback", "ms", msStat(all))
	if b.push {
		m = m.withTarget("median <= 10 ms", m.Median <= 10)
	} else {
		m = m.withTarget(fmt.Sprintf("median <= watcher poll = %.0f ms", ms(s.watchPoll)), m.Median <= ms(s.watchPoll))
	}
	tm := metric("observer", "early watcher told of first leader", "runs", Stat{N: len(samples), Median: float64(told), Max: float64(told), Min: float64(told)})
	tm = tm.withTarget(fmt.Sprintf("always (%d of %d)", len(samples), len(samples)), told == len(samples))
	return []Metric{
		m,
		metric("observer", "early watcher: first leader lag", "ms", msStat(early)),
		tm,
	}
}

// lags returns every watcher lag of samples: the early watcher's first
// leader (when told) and both watchers' after the hand-over.
func lags(samples []observerSample) (all []time.Duration, told int) {
	for _, x := range samples {
		if x.earlyTold {
			told++
			all = append(all, x.earlyLag)
		}
		all = append(all, x.handoverLags...)
	}
	return all, told
}

type pauseSample struct {
	tvOverlap, ctxOverlap time.Duration
	staleAccepted         int
	lateDelivered         int64
	succeeded             bool
}

// runPause: the leader is cut off for 1.5 terms (its requests held and
// delivered when it reconnects, even those it gave up on), then reconnected.
func runPause(ctx context.Context, s *settings, b *backend) ([]Metric, error) {
	samples, err := repeat(ctx, s.reps, s.parallel, func(ctx context.Context) (pauseSample, error) {
		return withCluster(ctx, s, b, func(c *cluster) (pauseSample, error) {
			var res pauseSample
			c.startN(3)
			tn, err := c.rec.next(ctx, s.patience())
			if err != nil {
				return res, err
			}
			if err := sleep(ctx, uniform(0, s.term/2)); err != nil {
				return res, err
			}
			old := c.candidate(tn.id)
			old.acc.cut(cutHold)
			if err := sleep(ctx, s.term*3/2); err != nil {
				return res, err
			}
			old.acc.cut(connected)
			reconnected := time.Now()
			if err := sleep(ctx, s.term/2); err != nil { // held writes land, the old leader campaigns again
				return res, err
			}
			res.tvOverlap, res.ctxOverlap = c.rec.overlaps()
			for _, w := range old.acc.acceptedSince(reconnected) {
				if w.e.Term <= tn.term {
					res.staleAccepted++
				}
			}
			res.lateDelivered = old.acc.lateSent.Load()
			c.rec.mu.Lock()
			for _, o := range c.rec.tenures {
				if o.term > tn.term && o.start.Before(reconnected) {
					res.succeeded = true
				}
			}
			c.rec.mu.Unlock()
			return res, nil
		})
	})
	if err != nil {
		return nil, err
	}
	var tvs, ctxs []time.Duration
	var stale, late, succ []float64
	for _, x := range samples {
		tvs = append(tvs, x.tvOverlap)
		ctxs = append(ctxs, x.ctxOverlap)
		stale = append(stale, float64(x.staleAccepted))
		late = append(late, float64(x.lateDelivered))
		if x.succeeded {
			succ = append(succ, 1)
		} else {
			succ = append(succ, 0)
		}
	}
	tv := metric("pause", "TimeView overlap", "ms", msStat(tvs))
	tv = tv.withTarget("0", tv.Max == 0)
	cx := metric("pause", "elected-context overlap", "ms", msStat(ctxs))
	cx = cx.withTarget("<= 5 ms", cx.Max <= 5)
	st := metric("pause", "old-leader writes accepted after reconnect", "writes", statOf(stale))
	st = st.withTarget("0", st.Max == 0)
	return []Metric{
		tv, cx, st,
		metric("pause", "held writes delivered late (all rejected)", "writes", statOf(late)),
		metric("pause", "successor elected during the pause", "runs", statOf(succ)).withNote("1 = yes"),
	}, nil
}

type herdSample struct {
	elect                  time.Duration
	writes, reads, busiest int
	readsUntil             int
}

// runHerd: Herd candidates; the leader cancels. Time to elect, requests, and
// the busiest 100 ms of store traffic from the cancel to shortly after.
func runHerd(ctx context.Context, s *settings, b *backend) ([]Metric, error) {
	tail := s.term / 8
	var startup herdSample
	samples, err := withCluster(ctx, s, b, func(c *cluster) ([]herdSample, error) {
		c.expected = s.herdExpected
		t0 := time.Now()
		c.startN(s.herd)
		tn, err := c.rec.next(ctx, s.patience())
		if err != nil {
			return nil, err
		}
		if err := sleep(ctx, tail); err != nil {
			return nil, err
		}
		startup.elect = tn.start.Sub(t0)
		startup.reads, startup.writes = c.el.opsBetween(t0, tn.start.Add(tail))
		var out []herdSample
		err = handOvers(ctx, s, c, tn, func(next *tenure, t0 time.Time) error {
			end := next.start.Add(tail)
			if err := sleep(ctx, time.Until(end)+time.Millisecond); err != nil {
				return err
			}
			var x herdSample
			x.elect = next.start.Sub(t0)
			x.reads, x.writes = c.el.opsBetween(t0, end)
			x.readsUntil, _ = c.el.opsBetween(t0, next.start)
			x.busiest = c.el.busiest(t0, end, 100*time.Millisecond)
			out = append(out, x)
			return nil
		})
		return out, err
	})
	if err != nil {
		return nil, err
	}
	var elect []time.Duration
	var writes, reads, readsUntil, busiest []float64
	for _, x := range samples {
		elect = append(elect, x.elect)
		writes = append(writes, float64(x.writes))
		reads = append(reads, float64(x.reads))
		readsUntil = append(readsUntil, float64(x.readsUntil))
		busiest = append(busiest, float64(x.busiest))
	}
	win := fmt.Sprintf("from the cancel to %v after the election", tail)
	tm := metric("herd", "cancel to next OnElected", "ms", msStat(elect))
	tm = tm.withTarget("median <= 50 ms", tm.Median <= 50)
	switch {
	case s.herdExpected == 0:
		tm = tm.withNote("ExpectedCandidates unset")
	case s.poll == 0:
		tm = tm.withNote(fmt.Sprintf("ExpectedCandidates %d, and the default PollInterval for it", s.herdExpected))
	default:
		tm = tm.withNote(fmt.Sprintf("ExpectedCandidates %d", s.herdExpected))
	}
	wm := metric("herd", "writes to elect (incl. release)", "writes", statOf(writes)).withNote(win)
	wm = wm.withTarget("<= 3", wm.Max <= 3)
	return []Metric{
		tm, wm,
		metric("herd", "reads until elected", "reads", statOf(readsUntil)),
		metric("herd", "reads in window", "reads", statOf(reads)).withNote(win),
		metric("herd", "busiest 100 ms", "requests", statOf(busiest)),
		metric("herd", "start-up: first election", "ms", msStat([]time.Duration{startup.elect})),
		metric("herd", "start-up: writes", "writes", statOf([]float64{float64(startup.writes)})),
	}, nil
}
