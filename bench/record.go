package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/hooks"

	clocks "github.com/vimeo/go-clocks"
)

// tenure is one candidate's time as leader, as its OnElected saw it.
type tenure struct {
	id    string
	term  int64
	tv    *leaderelection.TimeView
	start time.Time // OnElected called

	// Set under recorder.mu when OnElected saw its context end and when it
	// returned. validUntil is when the TimeView stopped being valid: its
	// expiry, or the return of OnElected, after which the engine sets it into
	// the past, whichever came first.
	ctxDone, returned, validUntil time.Time
	// tvOverlapAtStart is how long another tenure's TimeView was still valid
	// when this one began (0 when none was).
	tvOverlapAtStart time.Duration
}

// recorder records the tenures of every candidate of one election.
type recorder struct {
	mu      sync.Mutex
	tenures []*tenure
	elected chan *tenure
}

func newRecorder() *recorder {
	return &recorder{elected: make(chan *tenure, 4096)}
}

func (r *recorder) onElected(id string) func(ctx context.Context, tv *leaderelection.TimeView) {
	return func(ctx context.Context, tv *leaderelection.TimeView) {
		now := time.Now()
		tn := &tenure{id: id, term: tv.Term(), tv: tv, start: now}
		r.mu.Lock()
		for _, o := range r.tenures {
			if !o.returned.IsZero() {
				continue
			}
			if d := o.tv.Get().Sub(now); d > 0 {
				tn.tvOverlapAtStart = max(tn.tvOverlapAtStart, d)
			}
		}
		r.tenures = append(r.tenures, tn)
		r.mu.Unlock()
		select {
		case r.elected <- tn:
		default:
		}
		<-ctx.Done()
		done := time.Now()
		last := tv.Get()
		r.mu.Lock()
		tn.ctxDone = done
		tn.returned = time.Now()
		tn.validUntil = tn.returned
		if last.Before(tn.validUntil) {
			tn.validUntil = last
		}
		r.mu.Unlock()
	}
}

// latest returns the last election queued since the last look, or tn if
// there is none.
func (r *recorder) latest(tn *tenure) *tenure {
	for {
		select {
		case next := <-r.elected:
			tn = next
		default:
			return tn
		}
	}
}

var errNoElection = errors.New("no election")

// next waits up to timeout for the next election.
func (r *recorder) next(ctx context.Context, timeout time.Duration) (*tenure, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case tn := <-r.elected:
		return tn, nil
	case <-t.C:
		return nil, fmt.Errorf("%w within %v", errNoElection, timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// overlaps returns the longest time two tenures both held a valid TimeView,
// and the longest time two elected contexts were both seen running (as
// OnElected observed them), over every pair of tenures. Tenures still running
// count as running until now.
func (r *recorder) overlaps() (tv, elected time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for i, a := range r.tenures {
		tv = max(tv, a.tvOverlapAtStart)
		for _, b := range r.tenures[i+1:] {
			later := maxT(a.start, b.start)
			tv = max(tv, minT(a.tvEnd(), b.tvEnd()).Sub(later))
			elected = max(elected, minT(a.ctxEnd(now), b.ctxEnd(now)).Sub(later))
		}
	}
	return tv, elected
}

func (t *tenure) tvEnd() time.Time {
	if t.validUntil.IsZero() {
		return t.tv.Get()
	}
	return t.validUntil
}

func (t *tenure) ctxEnd(now time.Time) time.Time {
	if t.ctxDone.IsZero() {
		return now
	}
	return t.ctxDone
}

func minT(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// watchEvent is one change reported to a watcher.
type watchEvent struct {
	at time.Time
	c  leaderelection.Change
}

// watcher runs one WatchConfig.Watch and records what it reports.
type watcher struct {
	acc    *access
	cancel context.CancelFunc
	done   chan error

	mu     sync.Mutex
	events []watchEvent
	notify chan struct{} // closed and replaced on every event
}

// electedAt waits up to timeout for the watcher to report the tenure term as
// elected, and returns when it did.
func (w *watcher) electedAt(ctx context.Context, term int64, timeout time.Duration) (time.Time, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		for _, e := range w.events {
			if e.c.Kind == leaderelection.LeaderElected && e.c.Entry.Term == term {
				w.mu.Unlock()
				return e.at, true
			}
		}
		ch := w.notify
		w.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return time.Time{}, false
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
}

// candidate is one running Acquire.
type candidate struct {
	id     string
	acc    *access
	cancel context.CancelFunc
	done   chan error
}

// cluster is one election with its candidates and watchers.
type cluster struct {
	cfg *settings
	el  *election
	rec *recorder
	ctx context.Context

	// expected is the candidates' ExpectedCandidates (0: the default).
	expected int
	// tally is the backend's count of lost tenures and throttled writes.
	tally *tally

	mu       sync.Mutex
	seq      int
	cands    map[string]*candidate
	watchers []*watcher
}

func newCluster(ctx context.Context, cfg *settings, b *backend) (*cluster, error) {
	inner, err := b.newStore(ctx)
	if err != nil {
		return nil, err
	}
	if b.legacy {
		ctx = hooks.WithLegacyScheduling(ctx)
	}
	el := newElection(inner, b.push, b.latency, b.rtt)
	if cfg.peers && b.newPeer != nil {
		el.peer = func() (leaderelection.RaceDecider, error) { return b.newPeer(inner) }
	}
	return &cluster{
		cfg:   cfg,
		el:    el,
		rec:   newRecorder(),
		ctx:   ctx,
		cands: map[string]*candidate{},
		tally: &b.tally,
	}, nil
}

// start starts a new candidate.
func (c *cluster) start() *candidate {
	c.mu.Lock()
	c.seq++
	id := fmt.Sprintf("cand-%d", c.seq)
	c.mu.Unlock()
	acc := c.el.newAccess(id)
	ctx, cancel := context.WithCancel(c.ctx)
	cd := &candidate{id: id, acc: acc, cancel: cancel, done: make(chan error, 1)}
	cfg := leaderelection.Config{
		Decider:      acc.decider(),
		LeaderID:     id,
		HostPort:     []string{"127.0.0.1:1"},
		TermLength:   c.cfg.term,
		MaxClockSkew: c.cfg.skew,
		PollInterval: c.cfg.poll,
		OnElected:    c.rec.onElected(id),
		// As a user running this many candidates would set it.
		ExpectedCandidates: c.expected,
		Observer:           c.tally.observer(acc),
	}
	go func() { cd.done <- cfg.Acquire(ctx) }()
	c.mu.Lock()
	c.cands[id] = cd
	c.mu.Unlock()
	return cd
}

// startN starts n candidates.
func (c *cluster) startN(n int) {
	for range n {
		c.start()
	}
}

func (c *cluster) candidate(id string) *candidate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cands[id]
}

// others returns every running candidate but id.
func (c *cluster) others(id string) []*candidate {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*candidate
	for k, cd := range c.cands {
		if k != id {
			out = append(out, cd)
		}
	}
	return out
}

// stop cancels a candidate's Acquire and waits for it to return.
func (c *cluster) stop(cd *candidate) error {
	cd.cancel()
	err := <-cd.done
	c.mu.Lock()
	delete(c.cands, cd.id)
	c.mu.Unlock()
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: Acquire returned %v, want context.Canceled", cd.id, err)
	}
	return nil
}

// watch starts a watcher.
func (c *cluster) watch(name string) *watcher {
	acc := c.el.newAccess(name)
	ctx, cancel := context.WithCancel(c.ctx)
	w := &watcher{acc: acc, cancel: cancel, done: make(chan error, 1), notify: make(chan struct{})}
	wc := leaderelection.WatchConfig{
		Decider:      acc.decider(),
		MaxClockSkew: c.cfg.skew,
		PollInterval: c.cfg.watchPoll,
	}
	go func() {
		w.done <- wc.Watch(ctx, func(_ context.Context, ch leaderelection.Change) {
			w.mu.Lock()
			w.events = append(w.events, watchEvent{at: time.Now(), c: ch})
			close(w.notify)
			w.notify = make(chan struct{})
			w.mu.Unlock()
		})
	}()
	c.mu.Lock()
	c.watchers = append(c.watchers, w)
	c.mu.Unlock()
	return w
}

// close stops every candidate and watcher and ends held deliveries.
func (c *cluster) close() error {
	c.mu.Lock()
	cands := make([]*candidate, 0, len(c.cands))
	for _, cd := range c.cands {
		cands = append(cands, cd)
		cd.acc.cut(connected)
	}
	ws := c.watchers
	c.watchers = nil
	c.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, cd := range cands {
		wg.Go(func() {
			if err := c.stop(cd); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, w := range ws {
		w.cancel()
		<-w.done
	}
	c.el.cancel()
	c.tally.closed(c)
	// A postgres Decider holds a listener connection until closed, a kube
	// one its watch.
	c.el.mu.Lock()
	ds := append([]leaderelection.RaceDecider{c.el.inner}, c.el.peers...)
	errs = append(errs, c.el.peerErr)
	c.el.mu.Unlock()
	for _, d := range ds {
		if cl, ok := d.(io.Closer); ok {
			errs = append(errs, cl.Close())
		}
	}
	return errors.Join(errs...)
}

// uniform returns a random duration in [lo, hi).
func uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if !clocks.DefaultClock().SleepFor(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// tally counts, over every election of a backend, what the engine did that
// the scenarios did not ask for: tenures lost without a crash, throttled
// writes, and the busiest second of writes on one object. Safe for
// concurrent use.
type tally struct {
	mu sync.Mutex
	t  tallied
	// window is the length of the "second" in which writes to one object
	// are counted (one second, scaled like the run).
	window time.Duration
}

// tallied is a snapshot of a tally.
type tallied struct {
	// lost counts tenures that ended, by reason, on a candidate that was
	// never cut off (expired, superseded, refused, clock_skew).
	lost map[leaderelection.OustReason]int
	// throttled counts writes the engine saw throttled (after the store
	// client's own retries).
	throttled int
	// held is the time leaders held their terms, summed.
	held time.Duration
	// peakWrites is the most writes sent to one object within one window.
	peakWrites int
}

// observer returns the Observer of a candidate using acc, or nil when the
// tally is off (window 0: the loopback runs, which keep the engine as it
// runs without an Observer).
func (t *tally) observer(acc *access) leaderelection.Observer {
	t.mu.Lock()
	on := t.window > 0
	t.mu.Unlock()
	if !on {
		return nil
	}
	return leaderelection.ObserverFunc(func(e leaderelection.Event) {
		switch {
		case e.Kind == leaderelection.EventOusted && !acc.everCut.Load():
			switch e.Reason {
			case leaderelection.OustShutdown, leaderelection.OustReleased:
				return
			}
			t.mu.Lock()
			if t.t.lost == nil {
				t.t.lost = map[leaderelection.OustReason]int{}
			}
			t.t.lost[e.Reason]++
			t.mu.Unlock()
		case e.Kind == leaderelection.EventStoreRequest && e.Result == leaderelection.ResultThrottled:
			t.mu.Lock()
			t.t.throttled++
			t.mu.Unlock()
		}
	})
}

// closed adds the tenures and the write traffic of a closed cluster.
func (t *tally) closed(c *cluster) {
	var held time.Duration
	now := time.Now()
	c.rec.mu.Lock()
	for _, tn := range c.rec.tenures {
		held += tn.ctxEnd(now).Sub(tn.start)
	}
	c.rec.mu.Unlock()
	t.mu.Lock()
	w := t.window
	t.mu.Unlock()
	peak := 0
	if w > 0 {
		peak = c.el.busiestWrites(w)
	}
	t.mu.Lock()
	t.t.held += held
	t.t.peakWrites = max(t.t.peakWrites, peak)
	t.mu.Unlock()
}

// snapshot returns the counts so far.
func (t *tally) snapshot() tallied {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.t
	s.lost = maps.Clone(t.t.lost)
	return s
}

// lostTotal is the number of tenures lost without a crash.
func (s tallied) lostTotal() int {
	n := 0
	for _, v := range s.lost {
		n += v
	}
	return n
}
