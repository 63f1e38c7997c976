package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"

	clocks "github.com/vimeo/go-clocks"
)

var (
	errInjected     = errors.New("sim: injected failure: request not sent")
	errLostResponse = errors.New("sim: connection reset: the response was lost")
	errPartitioned  = errors.New("sim: network unreachable (partitioned)")
	errDead         = errors.New("sim: process is dead")
)

// store is the simulated object store: a memory.Decider, reached by each
// incarnation through an access that adds latency, failures, lost
// responses, late writes and partitions. An operation is modelled as a
// request leg, the store acting atomically, and a response leg: a write
// whose request was sent is applied when it arrives, whether or not the
// caller is still waiting.
type store struct {
	s   *sim
	mem *memory.Decider

	mu sync.Mutex
	// acc guards accepted.
	acc sync.Mutex
	// accepted holds, per (LeaderID, Term), every TermExpiry the store
	// accepted: a TimeView may only ever hold one of these.
	accepted map[tenureKey]map[time.Time]bool
	maxTerm  int64
	writes   int // applied writes
	inflight sync.WaitGroup
}

type tenureKey struct {
	id   string
	term int64
}

func newStore(s *sim) *store {
	return &store{s: s, mem: memory.NewDecider(), accepted: map[tenureKey]map[time.Time]bool{}, maxTerm: -1}
}

// current returns the stored record (for the orchestrator and checks).
func (st *store) current() *entry.RaceEntry {
	st.mu.Lock()
	defer st.mu.Unlock()
	rec, _ := st.mem.ReadCurrent(context.Background())
	return rec
}

func (st *store) wasAccepted(id string, term int64, expiry time.Time) bool {
	st.acc.Lock()
	defer st.acc.Unlock()
	return st.accepted[tenureKey{id, term}][expiry.Round(0).UTC()]
}

// apply performs a write that has reached the store, and checks it against
// the record it replaces.
//
// acceptStale makes it the negative control's broken store for this write:
// one that applies it even if it is conditioned on a stale version.
func (st *store) apply(p *proc, e *entry.RaceEntry, acceptStale bool) (entry.LeaderToken, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	prev, err := st.mem.ReadCurrent(context.Background())
	if err != nil {
		return entry.LeaderToken{}, err
	}
	var tok entry.LeaderToken
	if prev.Token.Version != e.Token.Version {
		if !acceptStale {
			s.event("store", "rejects %s from %s: conditioned on v%q, stored v%q", s.fmtRecord(e), p, e.Token.Version, prev.Token.Version)
			return entry.LeaderToken{}, fmt.Errorf("sim: conditioned on v%q, stored v%q: %w", e.Token.Version, prev.Token.Version, entry.ErrRaceLost)
		}
		// The broken store of the negative control.
		body, err := entry.Marshal(e)
		if err != nil {
			return entry.LeaderToken{}, err
		}
		st.mem.SetRaw(body)
		cur, _ := st.mem.ReadCurrent(context.Background())
		tok = cur.Token
		s.violate("store-stale-token", "store accepted %s from %s conditioned on stale v%q (stored v%q)", s.fmtRecord(e), p, e.Token.Version, prev.Token.Version)
	} else {
		if tok, err = st.mem.WriteEntry(context.Background(), e); err != nil {
			return tok, err
		}
	}
	st.writes++
	key := tenureKey{e.LeaderID, e.Term}
	st.acc.Lock()
	if st.accepted[key] == nil {
		st.accepted[key] = map[time.Time]bool{}
	}
	st.accepted[key][e.TermExpiry.Round(0).UTC()] = true
	st.acc.Unlock()
	s.event("store", "applies %s from %s (v%s)", s.fmtRecord(e), p, tok.Version)

	// The record sequence: an extension or release adds one to the election
	// number; a new tenure has Term = ElectionNumber, above every earlier
	// one (it may jump: a created record is numbered from the clock, and
	// a candidate numbers above everything it has seen); anything else
	// continues the tenure it replaces.
	newTenure := e.Term == e.ElectionNumber
	if (newTenure && e.ElectionNumber <= prev.ElectionNumber) || (!newTenure && e.ElectionNumber != prev.ElectionNumber+1) {
		s.violate("store-sequence", "election number %d follows %d", e.ElectionNumber, prev.ElectionNumber)
	}
	if newTenure {
		if e.Term <= st.maxTerm {
			s.violate("fencing", "new tenure with term %d after term %d", e.Term, st.maxTerm)
		}
		st.maxTerm = max(st.maxTerm, e.Term)
		// A takeover: the previous holder must have stopped believing it
		// leads, on its own clock, unless it released.
		if prev.ElectionNumber != entry.NoElections && !prev.Released {
			if h := s.procByID(prev.LeaderID); h != nil {
				if hnow := h.host.Now(); hnow.Before(prev.TermExpiry) {
					s.violate("premature-takeover", "%s takes over term %d (by %s) while its holder's clock reads %s, before its expiry %s",
						p, prev.Term, prev.LeaderID, s.fmtLocal(hnow), s.fmtLocal(prev.TermExpiry))
				}
			}
		}
	} else if prev.ElectionNumber == entry.NoElections || prev.Released || e.Term != prev.Term || e.LeaderID != prev.LeaderID {
		s.violate("store-sequence", "%s continues tenure %d over %s", p, e.Term, s.fmtRecord(prev))
	}
	return tok, nil
}

// access is one incarnation's way to the store.
type access struct {
	st *store
	p  *proc
}

// pushAccess adds change notifications.
type pushAccess struct{ *access }

var (
	_ leaderelection.RaceDecider    = (*access)(nil)
	_ leaderelection.ChangeNotifier = pushAccess{}
)

// leg is the latency of one leg of an operation.
func (a *access) leg() time.Duration {
	sc := a.st.s.sc
	if !a.st.s.faultsOn() {
		return a.p.ops.uniform(quietLatency/20, quietLatency)
	}
	if a.p.ops.float() < sc.PSlow {
		a.st.s.count("slow-op")
		return a.p.ops.uniform(sc.MaxLatency, sc.Term/2)
	}
	return a.p.ops.uniform(sc.MaxLatency/20, sc.MaxLatency)
}

// chance reports whether a fault of probability prob strikes this op.
func (a *access) chance(prob float64) bool {
	return a.st.s.faultsOn() && a.p.ops.float() < prob
}

// sleepCtx sleeps d (virtual time in the bubble), or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	return clocks.DefaultClock().SleepFor(ctx, d)
}

// blocked handles a partition at send time: the request fails at once or
// hangs until the caller gives up. It returns nil when not partitioned.
func (a *access) blocked(ctx context.Context, op string) error {
	part, hang := a.st.s.partitioned(a.p.slot)
	if !part {
		return nil
	}
	if hang {
		<-ctx.Done()
		return ctxEnded{op + " hung (partitioned)", ctx.Err()}
	}
	sleepCtx(ctx, quietLatency)
	return fmt.Errorf("sim: %s: %w", op, errPartitioned)
}

func (a *access) ctxErr(ctx context.Context, op string) error {
	return ctxEnded{op, ctx.Err()}
}

// ctxEnded is a call given up because its context ended. Its text does not
// say how: a deadline and a cancellation due at the same virtual instant
// (a write's deadline and the leader's watchdog, say) end it in either
// order, and the history must not depend on which came first.
type ctxEnded struct {
	op  string
	err error
}

func (e ctxEnded) Error() string { return "sim: " + e.op + ": its context ended" }
func (e ctxEnded) Unwrap() error { return e.err }

// respond delivers a response: a paused process receives it when it
// resumes, a reaped one not at all. The checker looks right after.
func (a *access) respond() bool {
	if !a.p.gate() {
		return false
	}
	a.st.s.checkSoon()
	return true
}

func (a *access) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	s, p := a.st.s, a.p
	if !p.gate() {
		return nil, errDead
	}
	p.countOp("read")
	if err := a.blocked(ctx, "read"); err != nil {
		return nil, err
	}
	if a.chance(s.sc.PFail) {
		s.count("op-failure")
		sleepCtx(ctx, a.leg())
		return nil, fmt.Errorf("sim: read: %w", errInjected)
	}
	if !sleepCtx(ctx, a.leg()) {
		return nil, a.ctxErr(ctx, "read")
	}
	rec := a.st.current()
	if !sleepCtx(ctx, a.leg()) {
		return nil, a.ctxErr(ctx, "read")
	}
	if part, _ := s.partitioned(p.slot); part || a.chance(s.sc.PLostResponse) {
		s.count("lost-read-response")
		return nil, fmt.Errorf("sim: read: %w", errLostResponse)
	}
	if !a.respond() {
		return nil, errDead
	}
	s.event(p.id, "read %s", s.fmtRecord(rec))
	return rec, nil
}

func (a *access) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	s, p := a.st.s, a.p
	var zero entry.LeaderToken
	if !p.gate() {
		return zero, errDead
	}
	p.countOp("write")
	s.event(p.id, "sends %s", s.fmtRecord(e))
	if err := a.blocked(ctx, "write"); err != nil {
		return zero, err
	}
	if a.chance(s.sc.PFail) {
		s.count("op-failure")
		sleepCtx(ctx, a.leg())
		return zero, fmt.Errorf("sim: write: %w", errInjected)
	}
	send := a.leg()
	if a.chance(s.sc.PLate) {
		send = p.ops.uniform(s.sc.Term/4, maxLateWrite*s.sc.Term)
		s.event(p.id, "its write (election %d) will sit in a queue for %v", e.ElectionNumber, send)
	}
	// Drawn now, on the caller's goroutine, to keep the ops stream in order.
	acceptStale := s.opt.StaleWriteProb > 0 && p.ops.float() < s.opt.StaleWriteProb
	e = e.Clone()
	type result struct {
		tok entry.LeaderToken
		err error
	}
	res := make(chan result, 1)
	var mu sync.Mutex
	gaveUp := false
	a.st.inflight.Add(1)
	go func() {
		defer a.st.inflight.Done()
		time.Sleep(send)
		tok, err := a.st.apply(p, e, acceptStale)
		mu.Lock()
		if gaveUp && err == nil {
			s.count("late-write")
			s.event("store", "applied %s after %s had given up waiting", s.fmtRecord(e), p)
		}
		mu.Unlock()
		res <- result{tok, err}
	}()
	giveUp := func() (entry.LeaderToken, error) {
		mu.Lock()
		gaveUp = true
		mu.Unlock()
		s.event(p.id, "gives up waiting for its write (election %d): its context ended", e.ElectionNumber)
		return zero, a.ctxErr(ctx, "write")
	}
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		return giveUp()
	}
	if !sleepCtx(ctx, a.leg()) {
		return giveUp()
	}
	if part, _ := s.partitioned(p.slot); part || a.chance(s.sc.PLostResponse) {
		if r.err == nil {
			s.count("ambiguous-write")
		}
		s.event(p.id, "loses the response to its write (election %d)", e.ElectionNumber)
		return zero, fmt.Errorf("sim: write: %w", errLostResponse)
	}
	if !a.respond() {
		return zero, errDead
	}
	if r.err != nil {
		s.event(p.id, "write (election %d) failed: %v", e.ElectionNumber, r.err)
	} else {
		s.event(p.id, "write (election %d) succeeded (v%s)", e.ElectionNumber, r.tok.Version)
	}
	return r.tok, r.err
}

func (a pushAccess) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	s, p := a.st.s, a.p
	if !p.gate() {
		return nil, errDead
	}
	p.countOp("push")
	if err := a.blocked(ctx, "wait for change"); err != nil {
		return nil, err
	}
	if a.chance(s.sc.PPushFail) {
		s.count("push-failure")
		sleepCtx(ctx, a.leg())
		return nil, fmt.Errorf("sim: wait for change: %w", errLostResponse)
	}
	rec, err := a.st.mem.WaitForChange(ctx, tok)
	if err != nil {
		return nil, err
	}
	if !sleepCtx(ctx, a.leg()) {
		return nil, a.ctxErr(ctx, "wait for change")
	}
	if part, _ := s.partitioned(p.slot); part {
		// The push is lost; the connection stays silent.
		<-ctx.Done()
		return nil, a.ctxErr(ctx, "wait for change")
	}
	if !a.respond() {
		return nil, errDead
	}
	s.event(p.id, "pushed %s", s.fmtRecord(rec))
	return rec, nil
}
