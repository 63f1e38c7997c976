package leaderelection_test

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// delayedStore is a memory.Decider behind a network with a fixed one-way delay
// on every request, reply and pushed change, as the benchmark models a store,
// and with noise a random one added (in a synctest bubble the delays are
// virtual, and exact). It logs every request, so that tests can count the
// writes of an election and time the reads of waiting candidates.
type delayedStore struct {
	mem  *memory.Decider
	leg  time.Duration // one way: a request's round trip is 2 x leg
	push bool
	// pushLegs, if not zero, is how many legs a pushed change takes (1
	// otherwise).
	pushLegs int
	// noise, if set, adds what a real server does: see storeNoise.
	noise *storeNoise
	// service, if set, is how long the store's one server is busy with
	// each request and each pushed change it delivers, one at a time: a
	// herd's requests, and the pushes of one write to every listener,
	// queue behind each other, as on a server short of cores.
	service time.Duration
	busyTo  time.Time // when the server is free

	mu  sync.Mutex
	ops []storeOp
}

type storeOp struct {
	at    time.Time // sent
	who   string
	write bool
}

func newDelayedStore(leg time.Duration, push bool) *delayedStore {
	return &delayedStore{mem: memory.NewDecider(), leg: leg, push: push}
}

func (s *delayedStore) log(who string, write bool) {
	s.mu.Lock()
	s.ops = append(s.ops, storeOp{at: time.Now(), who: who, write: write})
	s.mu.Unlock()
}

// between returns the requests sent in [from, to].
func (s *delayedStore) between(from, to time.Time) (reads, writes []storeOp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.ops {
		if o.at.Before(from) || o.at.After(to) {
			continue
		}
		if o.write {
			writes = append(writes, o)
		} else {
			reads = append(reads, o)
		}
	}
	return reads, writes
}

// access returns the Decider candidate who uses: it pushes changes if the
// store does.
func (s *delayedStore) access(who string) leaderelection.RaceDecider {
	a := &storeAccess{s: s, who: who}
	if n := s.noise; n != nil {
		a.req, a.push = newNoiseSource(n.seed, who, 0, n.jitter), newNoiseSource(n.seed, who, 1, n.push)
	}
	if s.push {
		return pushingAccess{a}
	}
	return a
}

type storeAccess struct {
	s   *delayedStore
	who string
	// req and push draw the noise of requests' legs and of pushed changes.
	req, push *noiseSource
}

// serve waits for the store's server to take one more request or push and
// to be done with it (see delayedStore.service).
func (s *delayedStore) serve() {
	if s.service <= 0 {
		return
	}
	s.mu.Lock()
	if now := time.Now(); s.busyTo.Before(now) {
		s.busyTo = now
	}
	s.busyTo = s.busyTo.Add(s.service)
	done := s.busyTo
	s.mu.Unlock()
	time.Sleep(time.Until(done))
}

func (a *storeAccess) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	a.s.log(a.who, false)
	time.Sleep(a.s.leg + a.req.draw())
	a.s.serve()
	rec, err := a.s.mem.ReadCurrent(ctx)
	time.Sleep(a.s.leg + a.req.draw())
	return rec, err
}

func (a *storeAccess) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	a.s.log(a.who, true)
	time.Sleep(a.s.leg + a.req.draw())
	a.s.serve()
	tok, err := a.s.mem.WriteEntry(ctx, e)
	time.Sleep(a.s.leg + a.req.draw())
	return tok, err
}

// storeNoise models what a real server adds to a delayedStore's fixed
// delays: every leg of a request takes up to jitter more, and every pushed
// change up to push more, drawn uniformly. Each candidate draws from sources
// of its own, seeded by its name, so that a run does not depend on the order
// in which goroutines wake.
type storeNoise struct {
	seed         uint64
	jitter, push time.Duration
}

// noiseSource draws one candidate's delays of one kind.
type noiseSource struct {
	mu   sync.Mutex
	r    *rand.Rand
	upTo time.Duration
}

func newNoiseSource(seed uint64, who string, i uint64, upTo time.Duration) *noiseSource {
	h := fnv.New64a()
	h.Write([]byte(who))
	return &noiseSource{r: rand.New(rand.NewPCG(seed, h.Sum64()+i)), upTo: upTo}
}

// draw returns a delay in [0, upTo), 0 without noise.
func (s *noiseSource) draw() time.Duration {
	if s == nil || s.upTo <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.r.Int64N(int64(s.upTo)))
}

type pushingAccess struct{ *storeAccess }

// WaitForChange delivers the change one leg (pushLegs, if set) after the store
// made it, plus its noise.
func (p pushingAccess) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	rec, err := p.s.mem.WaitForChange(ctx, tok)
	if err != nil {
		return nil, err
	}
	p.s.serve()
	time.Sleep(p.s.leg*time.Duration(max(p.s.pushLegs, 1)) + p.push.draw())
	return rec, nil
}

// schedCluster runs candidates on one delayedStore, in a synctest bubble.
type schedCluster struct {
	t      *testing.T
	st     *delayedStore
	mon    *racedecidertest.Monitor
	legacy bool
	// cfg fills in a candidate's Config beyond Decider, LeaderID and
	// OnElected.
	cfg   func(c *leaderelection.Config)
	probe func(id string, herd float64, window time.Duration)
	// seed, if not zero, seeds each candidate's random choices, so that
	// a run can be replayed.
	seed uint64

	n     int
	cands map[string]*racedecidertest.Candidate
}

func newSchedCluster(t *testing.T, st *delayedStore, legacy bool, cfg func(c *leaderelection.Config)) *schedCluster {
	return &schedCluster{t: t, st: st, mon: newMonitor(t), legacy: legacy, cfg: cfg, cands: map[string]*racedecidertest.Candidate{}}
}

// start starts one more candidate and returns its id.
func (c *schedCluster) start() string {
	c.n++
	id := "c" + itoa(c.n)
	cfg := leaderelection.Config{Decider: c.st.access(id), LeaderID: id, OnElected: c.mon.OnElected(id)}
	c.cfg(&cfg)
	ctx := c.t.Context()
	if c.seed != 0 {
		ctx = hooks.WithRand(ctx, rand.New(rand.NewPCG(c.seed, uint64(c.n))))
	}
	if c.legacy {
		ctx = hooks.WithLegacyScheduling(ctx)
	}
	if c.probe != nil {
		ctx = hooks.WithHerdProbe(ctx, func(h float64, w time.Duration) { c.probe(id, h, w) })
	}
	c.cands[id] = racedecidertest.StartCandidate(ctx, cfg)
	return id
}

// stop cancels candidate id's Acquire and waits for it to return.
func (c *schedCluster) stop(id string) {
	c.cands[id].Stop(c.t)
	delete(c.cands, id)
}

func (c *schedCluster) stopAll() {
	for id := range c.cands {
		c.stop(id)
	}
}

// handOver stops leader's candidate and returns the next tenure and when the
// stop began.
func (c *schedCluster) handOver(leader *racedecidertest.Tenure) (*racedecidertest.Tenure, time.Time) {
	t0 := time.Now()
	done := make(chan struct{})
	go func() { c.stop(leader.ID); close(done) }()
	next := next(c.mon)
	<-done
	return next, t0
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append(b, byte('0'+i%10))
	}
	slices.Reverse(b)
	return string(b)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
