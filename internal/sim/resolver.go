package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clocks "github.com/vimeo/go-clocks"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
	"github.com/racedecider/leaderelection/legrpc"
)

// This file drives legrpc's resolver: the Builder's resolver follows the
// election, as a gRPC client's would, on its own clock and store access,
// and hands what it resolves to a recording ClientConn, which checks it.
//
// Each incarnation publishes its own address (its id, port 443), so that an
// address names one incarnation, and through the records the resolver was
// served, one tenure.

// seenRec is the newest record of one address a resolver was served.
type seenRec struct {
	rec       *entry.RaceEntry
	readClock time.Time // the resolver's clock when the store served it
	at        time.Time // virtual instant it was delivered
	reported  bool      // a violation was reported about it
}

// recorder is the resolver.ClientConn gRPC would give the resolver,
// reduced to recording (and checking) what the resolver hands it.
type recorder struct {
	resolver.ClientConn // methods the resolver must not call panic
	p                   *proc
}

func (r *recorder) UpdateState(st resolver.State) error {
	addr := ""
	if len(st.Addresses) > 0 {
		addr = st.Addresses[0].Addr
	}
	s := r.p.s
	if s.opt.ResolverFreeze && !s.faultsOn() {
		// The broken resolver of a negative control: it stops handing
		// gRPC anything once the faults end.
		return nil
	}
	s.resolverState(r.p, addr)
	if s.opt.ResolverReplay && addr != "" {
		// The broken resolver of a negative control: each new leader's
		// addresses are followed by the previous leader's again.
		r.p.mu.Lock()
		prev := r.p.prevAddr
		r.p.mu.Unlock()
		if prev != "" && prev != addr {
			s.resolverState(r.p, prev)
		}
	}
	return nil
}

func (r *recorder) ReportError(err error) {
	r.p.s.event(r.p.id, "resolver reports: %v", err)
}

// ParseServiceConfig accepts any JSON object (leaders here publish none).
func (r *recorder) ParseServiceConfig(js string) *serviceconfig.ParseResult {
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return &serviceconfig.ParseResult{Err: err}
	}
	return &serviceconfig.ParseResult{}
}

// lagClock is a clock that reads lag behind its host's (the broken clock of
// a negative control): absolute waits are moved to match.
type lagClock struct {
	*procClock
	lag time.Duration
}

func (c lagClock) Now() time.Time                  { return c.procClock.Now().Add(-c.lag) }
func (c lagClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
func (c lagClock) SleepUntil(ctx context.Context, t time.Time) bool {
	return c.procClock.SleepUntil(ctx, t.Add(c.lag))
}

func (c lagClock) ContextWithDeadline(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	return c.procClock.ContextWithDeadline(ctx, t.Add(c.lag))
}

func (c lagClock) ContextWithDeadlineCause(ctx context.Context, t time.Time, cause error) (context.Context, context.CancelFunc) {
	return c.procClock.ContextWithDeadlineCause(ctx, t.Add(c.lag), cause)
}

// startResolver builds resolver k, as a gRPC client would, and pokes it
// with ResolveNow now and then (as a client whose connection failed) until
// the shutdown.
func (s *sim) startResolver(k int) *proc {
	sc := s.sc
	slot := sc.N + sc.Watchers + k
	p := s.newProc(slot, 1, fmt.Sprintf("r%d", k), newHostClock(s.start, sc.ResolverOffsets[k], 0))
	p.isResolver, p.clean = true, sc.CleanResolver[k]
	p.newest, p.noFail, p.maxRouted = map[string]*seenRec{}, true, -1
	var clk clocks.Clock = p.clock
	if s.opt.ResolverLag {
		clk = lagClock{p.clock, sc.Term / 2}
	}
	// (Its own reads draw from the ops stream of an incarnation 2 it
	// never has.)
	own := newStream(sc.Seed, slot, 2, opsStream)
	rd := &resolverDecider{watch: &access{st: s.st, p: p}, own: &access{st: s.st, p: p, ops: &own, own: true}}
	var d leaderelection.RaceDecider = rd
	if sc.Notifier {
		d = resolverPush{rd}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.ctx, p.cancel = ctx, cancel
	s.mu.Lock()
	s.resolvers = append(s.resolvers, p)
	s.byID[p.id] = p
	s.mu.Unlock()
	wc := leaderelection.WatchConfig{
		Decider:      d,
		MaxClockSkew: sc.Skew,
		PollInterval: sc.WatchPoll,
		Clock:        clk,
	}
	s.event(p.id, "resolver built (poll %v, clean %v)", sc.WatchPoll, p.clean)
	target := resolver.Target{}
	target.URL.Scheme, target.URL.Path = legrpc.Scheme, "/sim"
	// Its watcher's random choices (poll grid, retry jitter) come from the
	// seed, as a candidate's do. (Its engine stream is that of the
	// incarnation 2 it never has, as for its own reads above.)
	b := legrpc.NewBuilder(wc)
	hooks.ResolverContext(b, s.engineContext(incarnationRand(sc.Seed, slot, 2, engineStream)))
	r, err := b.Build(target, &recorder{p: p}, resolver.BuildOptions{})
	if err != nil {
		s.violate("resolver", "%s: Build: %v", p, err)
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		for p.simClock.SleepFor(ctx, p.work.uniform(sc.Term/4, 2*sc.Term)) {
			r.ResolveNow(resolver.ResolveNowOptions{})
		}
		r.Close()
	}()
	return p
}

// resolverState records and checks one state a resolver handed gRPC: addr
// is the leader's address, "" for none.
//
// It must not name a leader from a record whose term had already ended, on
// the resolver's clock, when the store served it; and it must not name an
// older tenure after a newer one. The record behind a state is the newest
// one of that address the resolver was served: the resolver hands over
// only records newer than all it has seen.
func (s *sim) resolverState(p *proc, addr string) {
	if addr == "" {
		s.event(p.id, "resolver: no leader")
		p.mu.Lock()
		p.routed = ""
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	sr := p.newest[addr]
	var term int64 = -1
	var ended, latest bool
	var rec entry.RaceEntry
	var readClock time.Time
	if sr != nil {
		rec, readClock = *sr.rec, sr.readClock
		term = rec.Term
		ended = !rec.Released && !rec.TermExpiry.After(readClock)
		latest = !sr.reported
		if ended {
			sr.reported = true
		}
	}
	prevMax := p.maxRouted
	p.maxRouted = max(p.maxRouted, term)
	p.routed = addr
	if p.lastAddr != addr {
		p.prevAddr, p.lastAddr = p.lastAddr, addr
	}
	p.mu.Unlock()
	s.event(p.id, "resolver routes to %s (term %d)", addr, term)
	switch {
	case sr == nil:
		s.violate("resolver-order", "%s routes to %s, whose record it was never served", p, addr)
	case ended && latest:
		s.violate("resolver-ended-term", "%s routes to %s from %s, whose term had ended when the store served it (resolver's clock %s)",
			p, addr, s.fmtRecord(&rec), s.fmtLocal(readClock))
	}
	if term < prevMax {
		s.violate("resolver-order", "%s routes to %s (term %d) after routing to term %d", p, addr, term, prevMax)
	}
}

// resolverSlack is how long after the newest record of the leader it
// routes to has ended (on its clock), or was released, a clean resolver may
// still route to it: the watcher reads at the expiry before reporting it.
const resolverSlack = 4 * quietLatency

// checkResolversLocked checks, at a quiescent instant, that no clean
// resolver routes to a leader whose newest record it was served has been
// released, or has ended on its clock (beyond resolverSlack). Called with
// s.mu held.
func (s *sim) checkResolversLocked(at time.Duration) {
	now := time.Now()
	for _, p := range s.resolvers {
		if !p.clean || p.ctx.Err() != nil {
			continue
		}
		hnow := p.host.Now()
		p.mu.Lock()
		sr := p.newest[p.routed]
		var msg string
		if p.routed != "" && sr != nil && !sr.reported {
			switch {
			case sr.rec.Released && now.Sub(sr.at) > resolverSlack:
				msg = fmt.Sprintf("%s still routes to %s, %v after it was served its release %s", p, p.routed, now.Sub(sr.at), s.fmtRecord(sr.rec))
			case !sr.rec.Released && hnow.After(sr.rec.TermExpiry.Add(resolverSlack)):
				msg = fmt.Sprintf("%s still routes to %s from %s, though its clock reads %s", p, p.routed, s.fmtRecord(sr.rec), s.fmtLocal(hnow))
			}
			if msg != "" {
				sr.reported = true
			}
		}
		p.mu.Unlock()
		if msg != "" {
			s.violateLocked(at, "resolver-ended-term", msg)
		}
	}
}

// checkResolverConvergenceLocked checks, in the quiet phase, that every
// resolver routes to the live leader once it has led for long enough to be
// seen: a poll interval and a few round trips (plus, for a resolver whose
// store access had faults, a term for a slow request still in flight when
// they stopped). Called with s.mu held.
func (s *sim) checkResolverConvergenceLocked(leader *tenure) {
	if leader == nil {
		return
	}
	sc := s.sc
	bound := sc.WatchPoll + 8*quietLatency
	now := time.Now()
	at := s.now()
	want := leader.p.addr()
	for _, p := range s.resolvers {
		b := bound
		if !p.clean {
			b += sc.Term
		}
		if now.Sub(leader.start) < b || at-sc.FaultEnd < b {
			continue
		}
		p.mu.Lock()
		got := p.routed
		// The resolver ends a record at its expiry and reads again then:
		// for a round trip or so it routes nowhere until the extension
		// comes back.
		rereading := false
		if sr := p.newest[want]; got == "" && sr != nil && !sr.rec.Released {
			since := p.host.Now().Sub(sr.rec.TermExpiry)
			rereading = since >= 0 && since < 8*quietLatency
		}
		p.mu.Unlock()
		if rereading {
			continue
		}
		if got != want {
			s.violateLocked(at, "resolver-stale", fmt.Sprintf("%s routes to %q, not to the leader %s elected %v ago (term %d)",
				p, got, want, now.Sub(leader.start), leader.term))
			continue
		}
		s.stats.ResolverConverged++
	}
}

// resolverDecider is a resolver's store access. The resolver reads from
// two goroutines at once (its watcher, and its own reads for Build and
// ResolveNow): each has its own stream of faults, so that which of the two
// draws first does not change the course of the run. The resolver's own
// reads are bounded by its poll interval or a second, the watcher's by
// 10 s or more: that tells them apart.
type resolverDecider struct{ watch, own *access }

// resolverPush adds change notifications (only the watcher waits).
type resolverPush struct{ *resolverDecider }

func (d *resolverDecider) String() string { return "sim store" }

func (d *resolverDecider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= max(d.own.st.s.sc.WatchPoll, time.Second) {
		return d.own.ReadCurrent(ctx)
	}
	return d.watch.ReadCurrent(ctx)
}

func (d *resolverDecider) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	return d.watch.WriteEntry(ctx, e)
}

func (d resolverPush) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	return pushAccess{d.watch}.WaitForChange(ctx, tok)
}

// The resolver's watcher has no seeded random source (legrpc starts it on
// a context of its own), so the backoff with which it reads again to
// confirm that a record has disappeared is not reproducible. Those reads
// are held until the longest the backoff could have waited (PollInterval/16
// for the first, /8 for the second), so that the store serves them at an
// instant the seed fixes.

// holdConfirm holds a read of the resolver's watcher that confirms an
// absence. It returns false if ctx ended first.
func (a *access) holdConfirm(ctx context.Context) bool {
	p := a.p
	p.mu.Lock()
	n, from := p.confirming, p.confirmFrom
	p.mu.Unlock()
	if n == 0 {
		return true
	}
	poll := a.st.s.sc.WatchPoll
	until := from.Add(poll / 16 << (n - 1))
	return sleepCtx(ctx, time.Until(until))
}

// confirmState follows the watcher through its confirmation of an
// absence: after a read finds no record where it had seen one, it reads
// twice more before reporting a deletion.
func (a *access) confirmState(rec *entry.RaceEntry) {
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case rec.ElectionNumber != entry.NoElections:
		p.watchSawRecord, p.confirming = true, 0
	case p.watchSawRecord:
		p.confirming++
		p.confirmFrom = time.Now()
		if p.confirming == 3 {
			p.watchSawRecord, p.confirming = false, 0
		}
	}
}

// addr is the address an incarnation publishes.
func (p *proc) addr() string { return p.id + ":443" }
