package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/legrpc"
)

// Lock order: store.mu before sim.mu (apply records events while holding
// it); proc.mu, store.acc and downstream.mu are leaves: nothing that locks is
// called while they are held.

// proc is one incarnation of a candidate: one Config.Acquire with its own
// LeaderID, on a slot (host) whose clock it shares with the slot's other
// incarnations.
type proc struct {
	s          *sim
	slot, inc  int
	id         string // the sim's name for it, unique
	leaderID   string // its Config.LeaderID: a restart may reuse its predecessor's
	watcher    int    // a watcher's index, or -1 for a candidate or a resolver
	isResolver bool   // a legrpc resolver (see resolver.go)
	clean      bool   // a watcher or resolver whose store access has no faults
	// noFail: its store access never fails a call (only latency, stale
	// reads and push faults): the resolver's watcher retries failed reads
	// with the process-wide random source, which no seed fixes.
	noFail         bool
	instant        bool // its OnElected returns at once while faults last
	guard          *legrpc.Guard
	ctx            context.Context // Acquire's (or Watch's)
	host           *hostClock
	clock          *procClock // the engine's
	simClock       *procClock // the worker's and the guarded calls'; the same but for negative controls
	disableRelease bool
	skew           time.Duration // as configured

	cancel context.CancelFunc
	done   chan struct{} // closed when Acquire has returned
	err    error         // Acquire's result, once done is closed

	mu sync.Mutex
	// frozen is non-nil while the process is paused or crashed: every
	// gate blocks until it is closed.
	frozen     chan struct{}
	held       int       // instants at which the current freeze held goroutines at the gate
	heldAt     time.Time // the last of them
	pauseUntil time.Time
	crashed    bool        // frozen until the end of the run
	dead       atomic.Bool // reaped at the end of the run: its calls fail at once
	// steppedDown: its OnElected returned on its own, and the engine
	// spaces out its next tenure (by 2 to 16 terms).
	steppedDown atomic.Bool
	stopped     bool          // its Acquire was cancelled
	stall       time.Duration // a stall due at the next clock reading
	stallAt     time.Time     // when the last stall began, and for how long
	stallFor    time.Duration
	// stalledUntil is when the stall that ends last ends: one goroutine's
	// stall can outlast another's that began after it.
	stalledUntil time.Time
	// ops decides the fate of store calls, work the worker's pauses and
	// step-downs: separate streams, as the two run on different goroutines
	// whose draws would otherwise interleave differently from run to run.
	ops, work stream

	refuseNext  bool            // its next store call is refused, and every one after
	refusedAt   time.Time       // when its first refusal was delivered
	afterRefuse int             // store calls made after that
	silentUntil time.Time       // its push channel is silent until then
	lastThaw    time.Time       // when it last came out of a pause or stall
	sawMax      int64           // highest ElectionNumber delivered to it
	sawTerms    map[int64]int64 // per term, the highest ElectionNumber delivered to it
	// readClock is, per record delivered to it (ElectionNumber and write
	// id), its clock when the store served it the first time.
	readClock map[string]time.Time
	calls     map[int64]int // running guarded calls and long actions, per term
	changed   []int64       // terms reported to LeaderChanged
	reports   []report      // a watcher's reports
	// staleAbsent: its last read was served stale, from before the
	// record existed.
	staleAbsent bool
	// staleAbsentRun counts the reads in a row delivered to it that were
	// served stale, from before the record existed.
	staleAbsentRun int
	// Its checked clock: when each offset sample was reported (its
	// clock), the last bound, whether (and since when) a bound showed it
	// too far from the store's; the election numbers it has sent.
	sampleAt   []time.Time
	offset     leaderelection.ClockOffset
	farSeen    bool
	farAt      time.Time
	farCounted bool
	sentEN     map[int64]bool
	// A resolver's: the newest record of each address it was served; the
	// address it routes to ("" for none), the last two different ones it
	// routed to, and the highest term it routed to.
	newest map[string]*seenRec
	// Its watcher's confirmation of an absence (see holdConfirm).
	watchSawRecord     bool
	confirming         int
	confirmFrom        time.Time
	routed             string
	lastAddr, prevAddr string
	maxRouted          int64

	reads, writes, pushes int
	readAts               []time.Time   // when each read was sent (see checkPollsInStep)
	opsByTerm             map[int64]int // ops per term-length window of virtual time
	budget                int           // the most ops allowed in one window (see opBudget)
	lastOpAt              time.Time     // virtual instant of the last store call
	sameInstant           int           // store calls made at lastOpAt
	// expiry is the TermExpiry of the newest record a watcher or a
	// resolver saw: it reads when that term ends, on the record's
	// schedule, not on a poll grid (see checkPollsInStep).
	expiry time.Time
	// slowWrites is writes as it stood after the last write that took
	// over a fifth of the term (see checkCost); 0 if none did.
	slowWrites int
}

func (p *proc) String() string { return p.id }

// gate blocks while the process is paused or crashed. It returns false once
// the process has been reaped: the caller must then do nothing visible.
func (p *proc) gate() bool {
	for {
		p.mu.Lock()
		ch, dead := p.frozen, p.dead.Load()
		if ch != nil {
			if now := time.Now(); !now.Equal(p.heldAt) {
				p.held++
				p.heldAt = now
			}
		}
		rank := p.held
		p.mu.Unlock()
		if dead {
			return false
		}
		if ch == nil {
			return true
		}
		<-ch
		// Released together, the goroutines a freeze held would run in no
		// fixed order: they go on in the order they arrived, a nanosecond
		// apart, so that a rerun takes the same course. (Those that arrived
		// at one instant go on together, as they would have.)
		time.Sleep(time.Duration(rank) * time.Nanosecond)
	}
}

// afterClockRead runs a scheduled stall: the process pauses right after
// reading its clock, and goes on with the stale reading.
//
// Every goroutine of the process that reads the clock at that same virtual
// instant stalls with it: which of them reads first is not fixed, and the
// run must not depend on it.
func (p *proc) afterClockRead() {
	now := time.Now()
	p.mu.Lock()
	d := p.stall
	first := d > 0
	if first {
		p.stall = 0
		p.stallAt, p.stallFor = now, d
		p.stalledUntil = maxTime(p.stalledUntil, now.Add(d))
	} else if now.Equal(p.stallAt) {
		d = p.stallFor
	}
	p.mu.Unlock()
	if d > 0 {
		if first {
			p.s.event(p.id, "stalls for %v right after reading its clock", d)
		}
		p.s.faultSleep(d)
		p.mu.Lock()
		p.lastThaw = maxTime(p.lastThaw, time.Now())
		p.mu.Unlock()
		p.gate()
	}
}

// frozenNow reports whether the process cannot run now (paused, crashed,
// stalled), or came out of it too recently for its goroutines to have
// caught up: the time its timers need, at a nanosecond per goroutine held.
func (p *proc) frozenNow() bool {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen != nil || p.crashed || now.Before(p.stalledUntil) || now.Before(p.lastThaw.Add(time.Microsecond))
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// markRefused records that the store refused this process for good: every
// further call is refused too.
func (p *proc) markRefused() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuseNext = true
	if p.refusedAt.IsZero() {
		p.refusedAt = time.Now()
	}
}

// silent reports whether its push channel is silent now.
func (p *proc) silent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.clean && p.s.faultsOn() && time.Now().Before(p.silentUntil)
}

// saw records a record delivered to it, and its clock when the store
// served it.
func (p *proc) saw(rec *entry.RaceEntry, clock time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rec.ElectionNumber >= p.sawMax {
		p.expiry = rec.TermExpiry
	}
	p.sawMax = max(p.sawMax, rec.ElectionNumber)
	if rec.ElectionNumber != entry.NoElections {
		p.sawTerms[rec.Term] = max(p.sawTerms[rec.Term], rec.ElectionNumber)
	}
	k := recKey(rec)
	if _, ok := p.readClock[k]; !ok {
		p.readClock[k] = clock
	}
	if p.isResolver && rec.ElectionNumber != entry.NoElections && len(rec.HostPort) > 0 {
		addr := rec.HostPort[0]
		if old := p.newest[addr]; old == nil || rec.NewerThan(old.rec) {
			p.newest[addr] = &seenRec{rec: rec.Clone(), readClock: p.readClock[k], at: time.Now()}
		}
	}
}

// atTermEnd reports whether a watcher or a resolver reads now because the
// term of the newest record it saw ends (its expiry, up to MaxClockSkew
// later: when a takeover becomes possible). All of them compute that moment
// from the same record, and read together there by design: such reads are
// not polls. p.mu is held.
func (p *proc) atTermEnd() bool {
	if p.watcher < 0 && !p.isResolver || p.expiry.IsZero() {
		return false
	}
	since := p.host.Now().Sub(p.expiry)
	return since >= 0 && since <= p.s.sc.Skew+stepWindow
}

func recKey(rec *entry.RaceEntry) string {
	return fmt.Sprintf("%d/%s", rec.ElectionNumber, rec.WriteID)
}

// beginCall and endCall track work done on behalf of the tenure of term:
// a guarded call, or a long action of the worker.
func (p *proc) beginCall(term int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[term]++
}

func (p *proc) endCall(term int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[term]--
}

func (p *proc) running(term int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[term]
}

// pause freezes the process for d (extending a pause in progress).
func (p *proc) pause(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead.Load() || p.crashed {
		return
	}
	until := time.Now().Add(d)
	if until.After(p.pauseUntil) {
		p.pauseUntil = until
	}
	if p.frozen == nil {
		p.frozen = make(chan struct{})
		p.held, p.heldAt = 0, time.Time{}
	}
	time.AfterFunc(d, p.maybeResume)
}

func (p *proc) maybeResume() {
	p.mu.Lock()
	if p.crashed || p.frozen == nil || time.Now().Before(p.pauseUntil) {
		p.mu.Unlock()
		return
	}
	close(p.frozen)
	p.frozen = nil
	p.lastThaw = time.Now()
	p.mu.Unlock()
	p.s.event(p.id, "resumes")
}

// endPause ends any pause at once (the end of the fault phase).
func (p *proc) endPause() {
	p.mu.Lock()
	p.pauseUntil = time.Time{}
	p.stall = 0
	p.mu.Unlock()
	p.maybeResume()
}

// crash freezes the process for the rest of the run: no release, no further
// store access, its TimeView left as it was. Requests already sent still
// reach the store.
func (p *proc) crash() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashed = true
	if p.frozen == nil {
		p.frozen = make(chan struct{})
		p.held, p.heldAt = 0, time.Time{}
	}
}

// reap ends a crashed process at the end of the run: its frozen calls return
// and fail, and its Acquire is cancelled, so that its goroutines exit.
func (p *proc) reap() {
	p.mu.Lock()
	p.dead.Store(true)
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
	p.mu.Unlock()
	p.cancel()
}

func (p *proc) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cancel()
}

func (p *proc) setStall(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = d
}

// stream is one of an incarnation's own random streams, so that, for
// example, its k-th store operation gets the same fate whatever the other
// incarnations do.
type stream struct {
	mu sync.Mutex
	r  *rand.Rand
}

// The kinds of an incarnation's random streams.
const (
	opsStream uint64 = iota
	workStream
	engineStream // handed to the engine through internal/hooks
	callStream   // the guarded calls' arrivals and lengths
)

// incarnationRand returns an incarnation's stream of the given kind.
func incarnationRand(seed uint64, slot, inc int, kind uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, kind<<62|uint64(slot)<<32|uint64(inc)))
}

func newStream(seed uint64, slot, inc int, kind uint64) stream {
	return stream{r: incarnationRand(seed, slot, inc, kind)}
}

func (st *stream) float() float64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.r.Float64()
}

func (st *stream) uniform(lo, hi time.Duration) time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	return uniform(st.r, lo, hi)
}

// spinLimit is how many store calls one incarnation may make at a single
// virtual instant. More is a busy loop: in virtual time it would never end,
// and on a real clock it spins, calling the store, until the clock ticks.
const spinLimit = 100

// maxAfterRefusal is how many store calls a candidate may make once the
// store has refused it for good (say, a release refused after the
// extension, then the read that ends Acquire): more is a retry loop.
const maxAfterRefusal = 3

// countOp counts a store operation for the cost checks, and detects and
// breaks busy loops: past spinLimit calls at one virtual instant, it
// reports a violation and makes each further call take a millisecond, as a
// real clock would tick, so that the run can go on.
func (p *proc) countOp(kind string) {
	now := time.Now()
	p.mu.Lock()
	if now.Equal(p.lastOpAt) {
		p.sameInstant++
	} else {
		p.lastOpAt, p.sameInstant = now, 0
	}
	spins := p.sameInstant
	refused := !p.refusedAt.IsZero()
	if refused {
		p.afterRefuse++
	}
	after := p.afterRefuse
	p.mu.Unlock()
	if after == maxAfterRefusal+1 {
		p.s.violate("refusal-retried", "%s made %d store calls after the store refused it for good", p, after)
	}
	if spins == spinLimit {
		p.s.violate("busy-loop", "%s made %d store calls (the last a %s) at one virtual instant without waiting", p, spins, kind)
	}
	if spins >= spinLimit {
		time.Sleep(time.Millisecond)
	}
	window := int64(time.Since(p.s.start) / p.s.sc.Term)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch kind {
	case "read":
		p.reads++
		if !p.atTermEnd() {
			p.readAts = append(p.readAts, now)
		}
	case "write":
		p.writes++
	case "push":
		p.pushes++
	}
	p.opsByTerm[window]++
	n := p.opsByTerm[window]
	if p.budget == 0 {
		p.budget = p.s.opBudget(p)
	}
	over := n > p.budget
	if n == p.budget+1 {
		// Reported at once, and then broken: each further call in this
		// window takes Term/64, so that the run can go on.
		p.mu.Unlock()
		p.s.violate("cost", "%s made more than %d store calls (its budget) within one term (window %d): retries without backoff?", p, p.budget, window)
		p.mu.Lock()
	}
	if over {
		p.mu.Unlock()
		time.Sleep(p.s.sc.Term / 64)
		p.mu.Lock()
	}
}

func (p *proc) opCounts() (reads, writes, pushes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reads, p.writes, p.pushes
}

// noteWrite takes note of a write that took took, for checkCost.
func (p *proc) noteWrite(took time.Duration) {
	if took <= p.s.sc.Term/5 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slowWrites = p.writes
}

// slowWriteAfter reports whether one of the writes after the first n took
// over a fifth of the term.
func (p *proc) slowWriteAfter(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slowWrites > n
}

// config returns the Config of this incarnation's Acquire.
func (p *proc) config(d leaderelection.RaceDecider) leaderelection.Config {
	sc := p.s.sc
	s := p.s
	cfg := leaderelection.Config{
		Decider:            d,
		LeaderID:           p.leaderID,
		ExpectedCandidates: sc.ExpectedCandidates,
		HostPort:           []string{p.addr()},
		TermLength:         sc.Term,
		MaxClockSkew:       p.skew,
		PollInterval:       sc.Poll,
		DisableRelease:     p.disableRelease,
		Clock:              p.clock,
		OnElected:          p.onElected,
		OnOusting: func(context.Context) {
			s.event(p.id, "OnOusting")
			s.ousting(p)
			if s.opt.DoubleOusting {
				s.ousting(p)
			}
		},
		LeaderChanged: func(_ context.Context, e entry.RaceEntry) {
			s.event(p.id, "sees new leader: %s", s.fmtRecord(&e))
			s.leaderChanged(p, e.Term)
			if s.opt.DoubleChanged {
				s.leaderChanged(p, e.Term)
			}
		},
		Logger: slog.New(&logHandler{s: s, who: p.id}),
	}
	if sc.Observed {
		cfg.Observer = observer{p}
	}
	// (The broken engine of a negative control ignores the setting.)
	cfg.EnforceMaxClockSkew = sc.Enforce && !s.opt.EnforceIgnored
	if p.guard != nil {
		cfg = p.attachGuard(cfg)
	}
	return cfg
}

// onElected is the leader's work: every so often, check the TimeView, then
// act on the downstream system with the fencing token. A worker pause
// between the check and the action is the case only fencing covers.
func (p *proc) onElected(ctx context.Context, tv *leaderelection.TimeView) {
	tn := p.s.registerTenure(p, tv, ctx)
	defer p.s.endTenure(tn)
	sc := p.s.sc
	if p.instant && p.s.faultsOn() {
		p.s.count("instant-return")
		p.steppedDown.Store(true)
		return
	}
	interval := sc.Term / 16
	for {
		if !p.simClock.SleepFor(ctx, interval) {
			return
		}
		if !tv.ValueInFuture() {
			continue // the engine ends the tenure; wait for the context
		}
		tok := tv.Term()
		if p.s.faultsOn() && p.work.float() < sc.PWorkerPause {
			d := p.work.uniform(sc.Term/10, 2*sc.Term)
			p.s.count("worker-pause")
			p.s.event(p.id, "worker checked its TimeView (term %d) and pauses %v before acting", tok, d)
			p.s.faultSleep(d)
		}
		if !p.gate() {
			return
		}
		p.s.down.act(p, tn, tok)
		if p.s.faultsOn() && p.work.float() < sc.PLongAction {
			// An action that runs on, ignoring the context: the tenure
			// must not be released under it.
			d := p.work.uniform(sc.Term/8, sc.Term)
			p.s.count("long-action")
			p.s.event(p.id, "worker starts a long action (%v) under term %d", d, tok)
			p.beginCall(tok)
			p.simClock.SleepFor(context.Background(), d)
			p.endCall(tok)
			p.s.event(p.id, "worker's long action ends")
		}
		if p.s.faultsOn() && p.work.float() < sc.PStepDown {
			p.s.count("step-down")
			p.s.event(p.id, "OnElected returns on its own (steps down)")
			p.steppedDown.Store(true)
			return
		}
	}
}

// logHandler records the engine's log lines in the history.
type logHandler struct {
	s     *sim
	who   string
	attrs []slog.Attr
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	add := func(a slog.Attr) bool {
		if a.Key == "leader_id" {
			return true
		}
		v := a.Value.Resolve()
		if v.Kind() == slog.KindTime {
			msg += fmt.Sprintf(" %s=%s", a.Key, h.s.fmtLocal(v.Time()))
		} else {
			msg += fmt.Sprintf(" %s=%v", a.Key, v)
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.s.event(h.who, "engine %s: %s", r.Level, msg)
	return nil
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{s: h.s, who: h.who, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *logHandler) WithGroup(string) slog.Handler { return h }
