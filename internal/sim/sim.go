package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
	"github.com/racedecider/leaderelection/legrpc"
)

// sim is one run: the scenario, the candidates, the store, the downstream
// system, the recorded history and the checker's state.
type sim struct {
	sc     *Scenario
	opt    Options
	start  time.Time
	sample time.Duration
	rng    *rand.Rand // the orchestrator's decisions at run time

	st   *store
	down *downstream

	faultsOver   atomic.Bool
	faultsOverCh chan struct{}
	poke         chan struct{}      // a store response was delivered: check soon
	reqs         chan func()        // run this at the next quiescent instant
	stopCheck    chan struct{}      // ends the checker
	checkDone    chan struct{}      // closed when the checker has ended
	lastAt       atomic.Int64       // the last event's virtual time, for events recorded outside the bubble
	running      atomic.Bool        // the bubble is running
	mu           sync.Mutex         // guards everything below
	history      []Event            //
	violations   []Violation        //
	stats        Stats              //
	procs        []*proc            // every incarnation
	byID         map[string]*proc   //
	slots        []*proc            // each slot's current incarnation; nil while down
	incs         []int              // incarnations started per slot
	partUntil    []time.Time        //
	partHang     []bool             //
	tenures      []*tenure          //
	watchers     []*proc            //
	resolvers    []*proc            //
	cloudCalls   []cloudCall        // calls to cloud backends, checked at the end
	deleted      map[tenureKey]bool // tenures whose record was deleted
	maxTerm      int64              // highest term that reached OnElected
	lastTenure   *tenure            //
	fileDir      string             // the file backend's directory, in a file run

	// Quiet-phase liveness.
	recovering  bool      // between the end of the faults and the recovery check
	recoveredAt time.Time // since when a live leader has held a valid TimeView
	watch       *tenure   // the leader that must keep its TimeView valid
	watchFailed bool
}

// fileRoot is where file runs keep their record: in memory if the host
// has a tmpfs at /dev/shm (each write is synced).
func fileRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "probe"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// stuckAfter is the real time after which a run reports itself stuck.
var stuckAfter = 30 * time.Second

// tenure is one OnElected call.
type tenure struct {
	p            *proc
	term         int64
	tv           *leaderelection.TimeView
	start, ended time.Time
	last         time.Time // the TimeView's value at the last check
	ctx          context.Context
	ousted       int            // OnOusting calls for it
	saw          map[int64]bool // the other tenures (by term) whose records its holder had seen when elected
	fwdAtStart   int64          // its host's wall-clock steps forward when it began
	lateReported bool
}

// validNow reports whether the tenure's TimeView is in the future on its
// holder's clock, read without faults, and the engine has not ended it (a
// wall clock stepped back must not revive an ended term).
func (tn *tenure) validNow() bool {
	return tn.p.host.Now().Before(tn.tv.Get()) && !hooks.TimeViewEnded(tn.tv)
}

// live reports whether the holder can still act (it has not crashed).
func (tn *tenure) live() bool {
	tn.p.mu.Lock()
	defer tn.p.mu.Unlock()
	return !tn.p.crashed && !tn.p.dead.Load()
}

// Run runs seed in its own synctest bubble, with o's breakages, and returns
// what happened. It does not fail t for a broken invariant (the caller
// decides); synctest itself fails t if goroutines outlive the run, and Run
// reports that as a "goroutine-leak" violation too.
func Run(t *testing.T, seed uint64, o Options) *Result {
	sc := NewScenario(seed, o)
	s := &sim{
		sc:        sc,
		opt:       o,
		rng:       rand.New(rand.NewPCG(seed, 0x0c4e57)),
		byID:      map[string]*proc{},
		slots:     make([]*proc, sc.N),
		incs:      make([]int, sc.N),
		partUntil: make([]time.Time, sc.N+sc.Watchers+sc.Resolvers),
		partHang:  make([]bool, sc.N+sc.Watchers+sc.Resolvers),
		deleted:   map[tenureKey]bool{},
		maxTerm:   -1,
		stats:     Stats{Runs: 1, Faults: map[string]int{}, Violations: map[string]int{}},
	}
	s.sample = o.SampleEvery
	if s.sample == 0 {
		s.sample = sc.Term / 50
	}
	// A run that takes too long in real time (a busy loop in virtual time)
	// prints the tail of its history, to tell what it is doing.
	if sc.FileBackend {
		dir, err := os.MkdirTemp(fileRoot(), "leaderelection-sim-")
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		defer os.RemoveAll(dir)
		s.fileDir = dir
	}
	stuck := time.AfterFunc(stuckAfter, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		from := max(0, len(s.history)-60)
		msg := fmt.Sprintf("sim: seed %d still running after %v of real time; last events:\n", seed, stuckAfter)
		for _, e := range s.history[from:] {
			msg += "  " + e.String() + "\n"
		}
		for _, p := range s.procs {
			r, w, pu := p.opCounts()
			msg += fmt.Sprintf("  %s: %d reads, %d writes, %d change waits\n", p, r, w, pu)
		}
		fmt.Fprint(os.Stderr, msg)
	})
	defer stuck.Stop()
	func() {
		defer func() {
			if r := recover(); r != nil {
				// synctest panics when the run's goroutines deadlock or
				// outlive its main goroutine.
				s.violate("goroutine-leak", "%v", r)
			}
		}()
		synctest.Test(t, func(*testing.T) {
			s.start = time.Now()
			s.running.Store(true)
			defer s.running.Store(false)
			s.run()
		})
	}()
	s.mu.Lock()
	res := &Result{Scenario: sc, Violations: s.violations, Stats: s.stats, History: s.history, Digest: digest(s.history)}
	s.mu.Unlock()
	return res
}

func (s *sim) now() time.Duration {
	if !s.running.Load() {
		// Outside the bubble (a panic report): the last virtual time.
		return time.Duration(s.lastAt.Load())
	}
	d := time.Since(s.start)
	s.lastAt.Store(int64(d))
	return d
}

func (s *sim) event(who, format string, args ...any) {
	at := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.byID[who]; p != nil && p.dead.Load() {
		// What a reaped process does on its way out is not part of the
		// run, and its goroutines unwind in no fixed order.
		return
	}
	s.history = append(s.history, Event{At: at, Who: who, What: fmt.Sprintf(format, args...)})
}

func (s *sim) violate(kind, format string, args ...any) {
	at := s.now()
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violateLocked(at, kind, msg)
}

func (s *sim) violateLocked(at time.Duration, kind, msg string) {
	s.violations = append(s.violations, Violation{At: at, Kind: kind, Msg: msg, Index: len(s.history)})
	s.history = append(s.history, Event{At: at, Who: "check", What: "VIOLATION " + kind + ": " + msg})
	s.stats.Violations[kind]++
}

func (s *sim) count(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Faults[kind]++
}

func (s *sim) faultsOn() bool { return !s.faultsOver.Load() }

// faultSleep sleeps d of virtual time, or until the faults end.
func (s *sim) faultSleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.faultsOverCh:
	}
}

func (s *sim) partitioned(slot int) (part, hang bool) {
	if !s.faultsOn() {
		return false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.partUntil[slot]), s.partHang[slot]
}

// checkSoon asks the checker to compare every TimeView once the goroutines
// woken at this instant have settled.
func (s *sim) checkSoon() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// atQuiescence runs f in the checker, right after a check, at this virtual
// instant once every other goroutine is blocked.
// f runs with s.mu held.
func (s *sim) atQuiescence(f func()) {
	done := make(chan struct{})
	s.reqs <- func() {
		s.mu.Lock()
		f()
		s.mu.Unlock()
		close(done)
	}
	<-done
}

// checker compares all TimeViews after every store response (the only
// moments a TimeView can move forward), at every tick of the sampler, and
// when the orchestrator asks. synctest.Wait lets the engine goroutines woken
// at the same instant finish their work first, so the comparison sees the
// TimeViews as they are at that virtual instant.
func (s *sim) checker() {
	defer close(s.checkDone)
	tick := time.NewTicker(s.sample)
	defer tick.Stop()
	for {
		var req func()
		select {
		case <-s.stopCheck:
			return
		case <-s.poke:
		case <-tick.C:
		case req = <-s.reqs:
		}
		synctest.Wait()
		s.checkAll()
		if req != nil {
			req()
		}
	}
}

// checkAll checks mutual exclusion at this instant: at most one TimeView
// is in the future on its holder's clock. It also checks that a valid
// TimeView holds an expiry the store accepted, and tracks quiet-phase
// liveness.
func (s *sim) checkAll() {
	at := s.now()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Checks++
	var valid, live []*tenure
	for _, tn := range s.tenures {
		v := tn.tv.Get()
		if !v.Equal(tn.last) {
			if v.After(tn.last) {
				s.stats.Extensions++
				s.history = append(s.history, Event{At: at, Who: "check", What: fmt.Sprintf("%s's TimeView (term %d) moves to %s", tn.p, tn.term, s.fmtLocal(v))})
			} else {
				s.history = append(s.history, Event{At: at, Who: "check", What: fmt.Sprintf("%s's TimeView (term %d) set back to %s", tn.p, tn.term, s.fmtLocal(v))})
			}
			tn.last = v
		}
		if !tn.validNow() {
			s.checkContextLocked(at, tn)
			continue
		}
		valid = append(valid, tn)
		if tn.live() {
			live = append(live, tn)
		}
		if !s.st.wasAccepted(tn.p.id, tn.term, v) {
			s.violateLocked(at, "timeview-unaccepted", fmt.Sprintf("%s's TimeView (term %d) holds %s, an expiry the store never accepted for it",
				tn.p, tn.term, s.fmtLocal(v)))
		}
	}
	s.checkResolversLocked(at)
	if len(valid) > 1 {
		if s.excusedLocked(valid) {
			s.stats.DeletionOverlaps++
		} else {
			s.violateLocked(at, "mutual-exclusion", s.describeLocked(valid))
		}
	}
	// Liveness after the faults stop.
	if s.recovering {
		if len(live) == 0 {
			s.recoveredAt = time.Time{}
		} else if s.recoveredAt.IsZero() {
			s.recoveredAt = now
		}
	}
	if s.watch != nil && !s.watchFailed && !s.watch.validNow() && s.watch.steppedDownForSkew() {
		// Its clock is too far from the store's, as it learnt: stepping
		// down is what EnforceMaxClockSkew asks for.
		s.history = append(s.history, Event{At: at, Who: "check", What: fmt.Sprintf("%s's TimeView (term %d) lapsed: it stepped down for clock skew", s.watch.p, s.watch.term)})
		s.watch = nil
	}
	if s.watch != nil && !s.watchFailed && !s.watch.validNow() {
		s.watchFailed = true
		s.violateLocked(at, "liveness", fmt.Sprintf("%s's TimeView (term %d) lapsed with no fault: expired at %s",
			s.watch.p, s.watch.term, s.fmtLocal(s.watch.tv.Get())))
	}
}

// excusedLocked reports whether every overlap among valid is one that
// deletion allows: the older tenure's record was deleted, and the newer
// leader never saw a record of it (a candidate that did waits a whole term
// after noticing the deletion).
func (s *sim) excusedLocked(valid []*tenure) bool {
	for i, a := range valid {
		for _, b := range valid[i+1:] {
			older, newer := a, b
			if b.term < a.term {
				older, newer = b, a
			}
			if !s.deletedUnseen(older, newer) {
				return false
			}
		}
	}
	return true
}

// deletedUnseen reports whether older's record was deleted and newer's
// holder never saw it. A newer leader that never saw the deleted record may
// have built on records written since by others who never saw it either:
// the documented limit of deletion.
func (s *sim) deletedUnseen(older, newer *tenure) bool {
	return s.deleted[tenureKey{older.p.id, older.term}] && !newer.saw[older.term]
}

// checkContextLocked checks that the elected context of a tenure whose
// TimeView has run out (on its holder's clock) has ended: the engine's
// watchdog must not be late. A process that is frozen cannot end it, and
// needs a moment once thawed.
func (s *sim) checkContextLocked(at time.Duration, tn *tenure) {
	if tn.ctx == nil || tn.lateReported || !tn.ended.IsZero() || tn.ctx.Err() != nil {
		return
	}
	// The watchdog's timer runs on the monotonic clock (here: on virtual
	// time), and a wall clock stepped forward passes the expiry before it
	// fires: the engine looks again every TermLength/16 for that, so the
	// context may end that long after the step, which its clock had
	// jumped by. Only the steps forward count: a step back earlier in the
	// tenure does not offset one forward, which still runs the wall clock
	// past a timer armed before it (seed 10099159: 93 ms back, then 73 ms
	// forward; the net step, -20 ms, allowed nothing).
	grace := time.Microsecond
	step := time.Duration(tn.p.host.forward.Load() - tn.fwdAtStart)
	stepped := step > 0
	if stepped {
		grace += step + s.sc.Term/16
	}
	hnow := tn.p.host.Now()
	if !hnow.After(tn.tv.Get().Add(grace)) || tn.p.frozenNow() || tn.p.dead.Load() {
		return
	}
	tn.lateReported = true
	msg := fmt.Sprintf("%s's elected context (term %d) has not ended though its TimeView expired at %s and its clock reads %s",
		tn.p, tn.term, s.fmtLocal(tn.tv.Get()), s.fmtLocal(hnow))
	if stepped {
		msg += " (its wall clock stepped forward during the tenure; TermLength/16 allowed)"
	}
	s.violateLocked(at, "elected-context-late", msg)
}

func (s *sim) describeLocked(valid []*tenure) string {
	msg := "TimeViews valid at once:"
	for _, tn := range valid {
		msg += fmt.Sprintf(" %s (term %d) until %s with its clock at %s (virtual %+.4fs);",
			tn.p, tn.term, s.fmtLocal(tn.tv.Get()), s.fmtLocal(tn.p.host.Now()), tn.p.host.virtualWhen(tn.tv.Get()).Sub(s.start).Seconds())
	}
	return msg
}

// registerTenure records an election, checked at once: nobody else holds a
// valid TimeView, and the fencing token went up.
func (s *sim) registerTenure(p *proc, tv *leaderelection.TimeView, ctx context.Context) *tenure {
	at := s.now()
	tn := &tenure{p: p, term: tv.Term(), tv: tv, start: time.Now(), last: tv.Get(), ctx: ctx, fwdAtStart: p.host.forward.Load()}
	p.mu.Lock()
	// What it had seen of other tenures: its own records do not count.
	tn.saw = map[int64]bool{}
	for term := range p.sawTerms {
		if term < tn.term {
			tn.saw[term] = true
		}
	}
	p.mu.Unlock()
	if !p.reported(tn.term) {
		s.violate("leader-changed", "%s elected with term %d without reporting it to LeaderChanged", p, tn.term)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = append(s.history, Event{At: at, Who: p.id, What: fmt.Sprintf("ELECTED: OnElected with term %d, TimeView until %s (clock %s)",
		tn.term, s.fmtLocal(tn.last), s.fmtLocal(p.host.Now()))})
	s.stats.Tenures++
	s.tenures = append(s.tenures, tn)
	if !tn.validNow() {
		// The process paused between the engine's own check and this call
		// (or the term was won too late to use): OnElected gets a TimeView
		// that has already expired. Harmless, since every action checks it;
		// it is not a tenure in the order of tenures.
		s.history = append(s.history, Event{At: at, Who: p.id, What: "OnElected called with a TimeView that has already expired"})
		return tn
	}
	var valid []*tenure
	for _, o := range s.tenures {
		if o != tn && o.validNow() {
			valid = append(valid, o)
		}
	}
	if len(valid) > 0 && !s.excusedLocked(append(valid, tn)) {
		s.violateLocked(at, "mutual-exclusion", fmt.Sprintf("%s elected with term %d while others hold a valid TimeView. %s",
			p, tn.term, s.describeLocked(append(valid, tn))))
	}
	switch {
	case tn.term > s.maxTerm:
		s.stats.Elections++
	case tn.term == s.maxTerm && s.lastTenure != nil && s.lastTenure.p == p:
		// The same incarnation leads the same term again: a write of its
		// whose outcome was unknown turned out applied. Nobody else wrote
		// in between.
	case s.deletedUnseenLocked(tn):
		// Its record was deleted (outside the protocol) before its
		// holder knew it elected (a read-back served before the
		// deletion, answered after it), and the higher term was begun
		// on no record by a candidate that never saw it: the documented
		// limit (see excusedLocked). Its actions still carry the lower
		// token, which the downstream rejects once the higher one acted
		// (seed 10105431).
	default:
		s.violateLocked(at, "fencing", fmt.Sprintf("%s elected with term %d, not above term %d of %s", p, tn.term, s.maxTerm, s.lastTenure.p))
	}
	s.maxTerm = max(s.maxTerm, tn.term)
	s.lastTenure = tn
	return tn
}

// deletedUnseenLocked reports whether tn's record was deleted and every
// tenure with a higher term was begun by a holder that had not seen it (see
// deletedUnseen).
func (s *sim) deletedUnseenLocked(tn *tenure) bool {
	if !s.deleted[tenureKey{tn.p.id, tn.term}] {
		return false
	}
	for _, o := range s.tenures {
		if o.term > tn.term && !s.deletedUnseen(tn, o) {
			return false
		}
	}
	return true
}

func (s *sim) endTenure(tn *tenure) {
	at := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	tn.ended = time.Now()
	s.history = append(s.history, Event{At: at, Who: tn.p.id, What: fmt.Sprintf("OnElected returns (term %d)", tn.term)})
}

// downstream is the system the leader acts on. It remembers the highest
// fencing token it has seen and rejects anything older.
type downstream struct {
	s   *sim
	mu  sync.Mutex
	max int64
}

func (d *downstream) act(p *proc, tn *tenure, tok int64) {
	s := d.s
	stale := !tn.validNow()
	d.mu.Lock()
	prev := d.max
	accept := tok >= d.max || s.opt.Unfenced
	if accept {
		d.max = max(d.max, tok)
	}
	d.mu.Unlock()
	s.mu.Lock()
	s.stats.Actions++
	if stale {
		s.stats.Stale++
		if !accept {
			s.stats.Fenced++
		}
	}
	s.mu.Unlock()
	switch {
	case tok != tn.term:
		s.violate("fencing", "%s acted with token %d during its tenure of term %d", p, tok, tn.term)
	case accept && tok < prev:
		s.violate("fencing-downstream", "the downstream accepted an action of %s with token %d after one with token %d", p, tok, prev)
	case !accept:
		s.event(p.id, "action with token %d REJECTED by the downstream (it has seen %d)", tok, prev)
	case stale:
		s.event(p.id, "action with token %d accepted after its TimeView expired (no newer token had reached the downstream)", tok)
	}
}

// run is the bubble's main goroutine: the orchestrator.
func (s *sim) run() {
	sc := s.sc
	// Channels must be made inside the bubble, or blocking on them does
	// not count as durably blocked and virtual time stops.
	s.faultsOverCh = make(chan struct{})
	s.st = newStore(s)
	if sc.FileBackend {
		if err := s.st.openFiles(s.fileDir); err != nil {
			s.violate("file-backend", "setting up the record's names: %v", err)
		}
	}
	s.down = &downstream{s: s, max: -1}
	s.poke = make(chan struct{}, 1)
	s.reqs = make(chan func())
	s.stopCheck = make(chan struct{})
	s.checkDone = make(chan struct{})
	go s.checker()

	for slot := range sc.N {
		s.startProc(slot)
	}
	for k := range sc.Watchers {
		s.startWatcher(k)
	}
	for k := range sc.Resolvers {
		go func() {
			s.sleepUntil(sc.ResolverStart[k])
			s.startResolver(k)
		}()
	}

	// The fault phase: scheduled faults, and the restarts they lead to.
	queue := append([]FaultEvent(nil), sc.Events...)
	for len(queue) > 0 {
		i := 0
		for j := range queue {
			if queue[j].At < queue[i].At {
				i = j
			}
		}
		ev := queue[i]
		queue = append(queue[:i], queue[i+1:]...)
		if ev.At >= sc.FaultEnd {
			continue
		}
		s.sleepUntil(ev.At)
		if next, ok := s.apply(ev); ok {
			queue = append(queue, next)
		}
	}

	// The quiet phase: faults stop, every slot runs a candidate.
	s.sleepUntil(sc.FaultEnd)
	s.endFaults()
	s.atQuiescence(func() {
		s.recovering = true
		s.recoveredAt = time.Time{}
	})
	s.checkSoon()

	// 1. Recovery: a live leader within RecoveryBound, that then keeps its
	// TimeView valid.
	s.sleepUntil(sc.FaultEnd + sc.RecoveryBound())
	if due := s.orphanedExtensionDue(); due > 0 {
		s.sleepUntil(due)
	}
	s.atQuiescence(func() {
		s.recovering = false
		if s.recoveredAt.IsZero() {
			if s.skewGapLocked() {
				return
			}
			s.violateLocked(s.now(), "liveness", fmt.Sprintf("no live candidate holds a valid TimeView %v after the faults stopped", sc.RecoveryBound()))
			return
		}
		rec := s.recoveredAt.Sub(s.start) - sc.FaultEnd
		s.stats.MaxRecovery = max(s.stats.MaxRecovery, rec)
		if sc.Skew > 0 {
			s.stats.RecoveryExcess = float64(rec-sc.Term-sc.Skew) / float64(sc.Skew)
			s.stats.ExcessSeed = sc.Seed
		}
		s.watch = s.liveLeaderLocked()
	})
	quietStart := s.snapshotOps()
	quietFrom := s.now()

	// 2. A graceful stop of the leader in a quiet system: the successor
	// must not wait out the term.
	s.sleepUntil(s.now() + uniform(s.rng, sc.Term/2, 2*sc.Term))
	s.checkCost(quietStart, s.now()-quietFrom)
	var old *tenure
	var oldEnd time.Time
	s.atQuiescence(func() {
		s.watch = nil
		old = s.liveLeaderLocked()
		s.checkResolverConvergenceLocked(old)
		if old != nil {
			oldEnd = old.p.host.virtualWhen(old.tv.Get())
		}
	})
	if old != nil {
		stopAt := time.Now()
		released := !old.p.disableRelease
		s.event("sim", "graceful stop of the leader %s (release: %v)", old.p, released)
		s.stopSlot(old.p.slot, old.p)
		s.startProc(old.p.slot)
		bound := sc.HandoverBound()
		if !released {
			bound = sc.RecoveryBound()
		}
		s.sleepUntil(s.now() + bound)
		s.atQuiescence(func() {
			var next *tenure
			for _, tn := range s.tenures {
				if tn.start.After(stopAt) || tn.start.Equal(stopAt) && tn != old {
					next = tn
					break
				}
			}
			switch {
			case next == nil:
				s.violateLocked(s.now(), "liveness", fmt.Sprintf("nobody elected within %v of %s's graceful stop", bound, old.p))
			case released && sc.HandoverBound() < sc.Term/2 && !next.start.Before(oldEnd):
				// (With a poll interval of half a term or more, waiting
				// candidates may well read next only once the term is over.)
				s.violateLocked(s.now(), "liveness", fmt.Sprintf("%s waited out %s's released term (elected %v after the stop)", next.p, old.p, next.start.Sub(stopAt)))
			default:
				if released {
					s.stats.MaxHandover = max(s.stats.MaxHandover, next.start.Sub(stopAt))
					if sc.Notifier {
						s.stats.MaxHandoverPush = max(s.stats.MaxHandoverPush, next.start.Sub(stopAt))
					}
				}
			}
			s.watch = s.liveLeaderLocked()
		})
	}
	s.sleepUntil(s.now() + sc.Term)
	s.atQuiescence(func() {
		leader := s.liveLeaderLocked()
		if leader == nil && !s.skewGapLocked() {
			s.violateLocked(s.now(), "liveness", "no leader at the end of the quiet phase")
		}
		s.checkResolverConvergenceLocked(leader)
		s.watch = nil
	})

	s.checkWatchCoverage(s.now())
	s.shutdown()
	s.mu.Lock()
	s.stats.Virtual = time.Since(s.start)
	for _, p := range s.procs {
		r, w, pu := p.opCounts()
		s.stats.Reads += r
		s.stats.Writes += w
		s.stats.Pushes += pu
	}
	s.mu.Unlock()
}

// skewGapLocked reports whether a leader stepped down after the faults
// ended, its clock too far from the store's (it learns so from a write,
// and campaigns again once its old evidence has aged out, measuring again
// with its acquisition): the term is then left to expire when it runs
// with DisableRelease, and the quiet phase's liveness bounds do not
// allow for that. It records that they were not checked.
func (s *sim) skewGapLocked() bool {
	end := s.start.Add(s.sc.FaultEnd)
	for _, tn := range s.tenures {
		if tn.steppedDownForSkew() && tn.p.farSince(end) {
			s.history = append(s.history, Event{At: s.now(), Who: "check", What: fmt.Sprintf("no leader: %s stepped down for clock skew (term %d); liveness not checked", tn.p, tn.term)})
			return true
		}
	}
	return false
}

// orphanedExtensionDue returns when a leader is due instead of
// RecoveryBound after the faults stopped, or 0. A leader's extension sent
// after the faults stopped, applied, and answered only after its term ran
// out ends the tenure, and the engine leaves its record to expire, never
// adopted or released (leader.go): that record's term counts as a cut-off
// leader's, from its commit instead of the faults' end (seed 10141710).
func (s *sim) orphanedExtensionDue() time.Duration {
	rec, holder, committed := s.st.stored()
	if rec == nil || holder == nil || rec.Released || committed.IsZero() {
		return 0
	}
	at := committed.Sub(s.start)
	if at <= s.sc.FaultEnd {
		return 0
	}
	var ended bool
	s.atQuiescence(func() {
		if !s.recoveredAt.IsZero() {
			return
		}
		for _, tn := range s.tenures {
			if tn.p == holder && tn.term == rec.Term && !tn.ended.IsZero() {
				ended = true
			}
		}
	})
	if !ended {
		return 0
	}
	return at + s.sc.RecoveryBound()
}

// liveLeaderLocked returns the one live tenure with a valid TimeView.
func (s *sim) liveLeaderLocked() *tenure {
	for _, tn := range s.tenures {
		if tn.validNow() && tn.live() {
			return tn
		}
	}
	return nil
}

func (s *sim) sleepUntil(at time.Duration) {
	if d := time.Until(s.start.Add(at)); d > 0 {
		time.Sleep(d)
	}
}

// newProc returns incarnation inc of slot, named id, on host: what every
// participant (candidate, watcher, resolver) has.
func (s *sim) newProc(slot, inc int, id string, host *hostClock) *proc {
	p := &proc{
		s:         s,
		slot:      slot,
		inc:       inc,
		watcher:   -1,
		id:        id,
		leaderID:  id,
		host:      host,
		done:      make(chan struct{}),
		ops:       newStream(s.sc.Seed, slot, inc, opsStream),
		work:      newStream(s.sc.Seed, slot, inc, workStream),
		opsByTerm: map[int64]int{},
		readClock: map[string]time.Time{},
		calls:     map[int64]int{},
		sawMax:    -1,
		sawTerms:  map[int64]int64{},
	}
	p.clock = &procClock{h: host, p: p}
	p.simClock = &procClock{h: host, p: p, sim: true}
	return p
}

// startProc starts a new incarnation on slot.
func (s *sim) startProc(slot int) *proc {
	sc := s.sc
	s.mu.Lock()
	s.incs[slot]++
	inc := s.incs[slot]
	s.mu.Unlock()
	p := s.newProc(slot, inc, fmt.Sprintf("c%d.%d", slot, inc), s.hostClock(slot))
	p.skew = sc.Skew
	if sc.ZeroSkew[slot] {
		p.skew = 0
	}
	if slot == sc.FarSlot {
		s.mu.Lock()
		s.stats.FarProcs++
		s.mu.Unlock()
	}
	p.disableRelease = s.faultsOn() && p.work.float() < sc.PDisableRelease
	p.instant = p.work.float() < sc.PInstant
	if reuse := p.work.float() < sc.PReuseID; reuse && inc > 1 {
		// A restarted process that names itself after its host, as its
		// predecessor did (which may still be alive).
		s.mu.Lock()
		for i := len(s.procs) - 1; i >= 0; i-- {
			if s.procs[i].slot == slot {
				p.leaderID = s.procs[i].leaderID
				break
			}
		}
		s.mu.Unlock()
		s.count("reused-leader-id")
	}
	if sc.Guard[slot] {
		p.guard = &legrpc.Guard{}
	}
	var d leaderelection.RaceDecider = &access{st: s.st, p: p}
	if sc.Notifier {
		d = pushAccess{&access{st: s.st, p: p}}
	}
	if kind := sc.backend(slot); kind != backendSim {
		cd, err := s.newCloudDecider(p, kind)
		if err != nil {
			s.violate("backend", "%s: setting up its %s client: %v", p, kind, err)
		} else {
			d = cd
		}
	}
	cfg := p.config(d)
	// The engine's own random choices come from the seed too, so that a
	// rerun takes the same course.
	engineRand := incarnationRand(sc.Seed, slot, inc, engineStream)
	ctx, cancel := context.WithCancel(s.engineContext(engineRand))
	p.cancel, p.ctx = cancel, ctx
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.byID[p.id] = p
	s.slots[slot] = p
	s.mu.Unlock()
	s.event(p.id, "starts (LeaderID %s, DisableRelease %v, MaxClockSkew %v, instant OnElected %v, guard %v, clock %s)",
		p.leaderID, p.disableRelease, p.skew, p.instant, p.guard != nil, s.fmtLocal(p.host.Now()))
	go func() {
		err := cfg.Acquire(ctx)
		p.err = err
		s.event(p.id, "Acquire returned: %v", err)
		if errors.Is(err, entry.ErrRefused) {
			s.refusalEnded(p)
		}
		close(p.done)
	}()
	if p.guard != nil {
		go p.serveCalls()
	}
	return p
}

// hostClocks are made once per slot.
func (s *sim) hostClock(slot int) *hostClock {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.slot == slot {
			return p.host
		}
	}
	return newHostClock(s.start, s.sc.Offsets[slot], s.sc.Drift[slot])
}

// stopSlot stops p (gracefully: Acquire's context is cancelled) if it is
// still the slot's incarnation.
func (s *sim) stopSlot(slot int, p *proc) {
	s.mu.Lock()
	if s.slots[slot] == p {
		s.slots[slot] = nil
	}
	s.mu.Unlock()
	p.stop()
}

// target resolves a fault's slot: anyLeader means the slot whose current
// incarnation holds the record.
func (s *sim) target(ev FaultEvent) int {
	if ev.Slot != anyLeader {
		return ev.Slot
	}
	rec := s.st.current()
	h := s.st.holderProc()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := h; p != nil && p.watcher < 0 && s.slots[p.slot] == p && !rec.Released {
		return p.slot
	}
	return s.rng.IntN(s.sc.N)
}

// apply applies a scheduled fault, and returns the restart it leads to.
func (s *sim) apply(ev FaultEvent) (FaultEvent, bool) {
	slot := s.target(ev)
	s.mu.Lock()
	var p *proc
	if slot < len(s.slots) {
		p = s.slots[slot]
	}
	s.mu.Unlock()
	ev.Slot = slot
	if p == nil && ev.Kind != fRestart && ev.Kind != fDelete && ev.Kind != fSilent {
		return FaultEvent{}, false // the slot is down: nothing to do
	}
	s.count(ev.Kind.String())
	s.event("sim", "FAULT %s", ev)
	switch ev.Kind {
	case fPartition:
		s.mu.Lock()
		if until := time.Now().Add(ev.Dur); until.After(s.partUntil[slot]) {
			s.partUntil[slot] = until
		}
		s.partHang[slot] = ev.Hang
		s.mu.Unlock()
	case fPause:
		p.pause(ev.Dur)
	case fStall:
		p.setStall(ev.Dur)
	case fCrash:
		p.crash()
		s.mu.Lock()
		s.slots[slot] = nil
		s.mu.Unlock()
	case fStop:
		if p.disableRelease {
			s.count("abandon")
		}
		s.stopSlot(slot, p)
	case fRestart:
		if p == nil {
			s.startProc(slot)
		}
	case fDelete:
		rec, h, ok := s.st.remove()
		if ok && h != nil {
			s.mu.Lock()
			s.deleted[tenureKey{h.id, rec.Term}] = true
			s.mu.Unlock()
		}
	case fClockStep:
		to := int64(ev.Dur - s.sc.Offsets[slot])
		if old := p.host.step.Swap(to); old > to {
			p.host.backSteps.Add(1)
		} else {
			p.host.forward.Add(to - old)
		}
		p.host.noteStep(ev.Dur - s.sc.Offsets[slot])
	case fRefuse:
		if s.now() > s.sc.FaultEnd-18*s.sc.Term {
			// Too late: the candidate could still be ending (after a
			// tenure pause of up to 16 terms) when the quiet phase,
			// which needs every slot up, begins.
			break
		}
		p.mu.Lock()
		p.refuseNext = true
		p.mu.Unlock()
	case fSilent:
		var q *proc
		s.mu.Lock()
		if slot < s.sc.N {
			q = s.slots[slot]
		} else if k := slot - s.sc.N; k < len(s.watchers) {
			q = s.watchers[k]
		}
		s.mu.Unlock()
		if q != nil {
			q.mu.Lock()
			q.silentUntil = time.Now().Add(ev.Dur)
			q.mu.Unlock()
		}
	}
	if (ev.Kind == fCrash || ev.Kind == fStop) && ev.RestartAfter >= 0 {
		return FaultEvent{At: s.now() + ev.RestartAfter, Kind: fRestart, Slot: slot, RestartAfter: -1}, true
	}
	return FaultEvent{}, false
}

// endFaults ends every fault at once and brings every slot back up.
func (s *sim) endFaults() {
	s.faultsOver.Store(true)
	close(s.faultsOverCh)
	s.event("sim", "FAULTS END: partitions heal, pauses end, the store behaves; down slots restart")
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	var down []int
	for slot, p := range s.slots {
		if p == nil {
			down = append(down, slot)
		}
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.endPause()
	}
	for _, slot := range down {
		s.startProc(slot)
	}
	// Let the processes woken here settle before any is redeployed: a
	// paused one that resumes at this instant (its term over, say) and the
	// cancellation of its Acquire would otherwise race, and the run would
	// not replay.
	s.atQuiescence(func() {})
	// A worker whose OnElected stepped down is fixed and redeployed: the
	// engine would otherwise sit out up to 16 terms before campaigning
	// again, by design, and the quiet phase checks liveness.
	for _, p := range procs {
		s.mu.Lock()
		current := s.slots[p.slot] == p
		s.mu.Unlock()
		if current && p.steppedDown.Load() {
			s.event("sim", "redeploys %s, whose OnElected stepped down", p)
			s.stopSlot(p.slot, p)
			s.startProc(p.slot)
		}
	}
}

type opSnapshot map[*proc][3]int

func (s *sim) snapshotOps() opSnapshot {
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()
	snap := opSnapshot{}
	for _, p := range procs {
		r, w, pu := p.opCounts()
		snap[p] = [3]int{r, w, pu}
	}
	return snap
}

// checkCost checks the design's cost budget over a quiet window: the leader
// writes about twice per term, a waiting candidate reads about once per poll
// interval (less with pushes).
func (s *sim) checkCost(from opSnapshot, window time.Duration) {
	sc := s.sc
	terms := float64(window) / float64(sc.Term)
	maxReads := int(float64(window)/float64(sc.pollInterval())+2*terms) + 3
	// The leader times its extensions from the slowest of its last 8
	// writes: after a slow store (or a slow write among those 8), up to 8
	// early extensions, each pushed to every waiting candidate.
	early := func(p *proc, writes int) bool { return sc.SlowTo > 0 || p.slowWriteAfter(writes-8) }
	anyEarly := false
	for p, c := range from {
		anyEarly = anyEarly || early(p, c[1])
	}
	for p, c := range from {
		r, w, pu := p.opCounts()
		r, w, pu = r-c[0], w-c[1], pu-c[2]
		maxWrites, maxPushes := int(2*terms)+3, int(2*terms)+3
		if early(p, c[1]) {
			maxWrites += 8
		}
		if anyEarly {
			maxPushes += 8
		}
		if r > maxReads || w > maxWrites || pu > maxPushes {
			s.violate("cost", "%s made %d reads, %d writes, %d change waits in %v of quiet time (budget %d, %d, %d)",
				p, r, w, pu, window, maxReads, maxWrites, maxPushes)
		}
	}
}

// shutdown stops every candidate, reaps the crashed ones, and waits for all
// their goroutines and for the store's queued writes.
func (s *sim) shutdown() {
	sc := s.sc
	s.event("sim", "SHUTDOWN: every live candidate is stopped, crashed ones are reaped")
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()
	for _, p := range procs {
		p.mu.Lock()
		crashed := p.crashed
		p.mu.Unlock()
		if crashed {
			p.reap()
		} else {
			p.stop()
		}
	}
	bound := 2*sc.Term + sc.Skew
	deadline := time.After(bound)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
		}
	}
	for _, p := range procs {
		p.mu.Lock()
		refused := !p.refusedAt.IsZero()
		p.mu.Unlock()
		select {
		case <-p.done:
			if refused && errors.Is(p.err, entry.ErrRefused) {
				break
			}
			if !errors.Is(p.err, context.Canceled) {
				s.violate("acquire-error", "%s: Acquire returned %v, want context.Canceled", p, p.err)
			}
		default:
			s.violate("shutdown", "%s: Acquire did not return within %v of its context's end", p, bound)
			p.reap()
		}
	}
	deadline = time.After(bound)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			// Returning now leaves goroutines behind: synctest reports
			// them, and Run records a goroutine-leak violation.
			s.violate("shutdown", "%s: Acquire did not return even once reaped", p)
			return
		}
	}
	s.mu.Lock()
	watchers := append([]*proc(nil), s.watchers...)
	resolvers := append([]*proc(nil), s.resolvers...)
	s.mu.Unlock()
	for _, r := range resolvers {
		r.cancel()
		select {
		case <-r.done:
		case <-time.After(bound):
			s.violate("shutdown", "%s: the resolver did not close within %v", r, bound)
		}
	}
	for _, w := range watchers {
		w.cancel()
		select {
		case <-w.done:
			if !errors.Is(w.err, context.Canceled) {
				s.violate("watch-error", "%s: Watch returned %v, want context.Canceled", w, w.err)
			}
		case <-time.After(bound):
			s.violate("shutdown", "%s: Watch did not return within %v of its context's end", w, bound)
		}
	}
	// Writes still queued in the network land, or are refused, by then.
	time.Sleep(maxLateWrite*sc.Term + sc.Term)
	s.checkCloudCalls()
	s.checkPollsInStep()
	// Every tenure of a process that ran to its end had exactly one
	// OnOusting, after OnElected returned.
	s.mu.Lock()
	for _, tn := range s.tenures {
		if !tn.p.dead.Load() && tn.ousted != 1 {
			s.violateLocked(s.now(), "ousting", fmt.Sprintf("%s: %d OnOusting calls for term %d", tn.p, tn.ousted, tn.term))
		}
	}
	s.mu.Unlock()
	close(s.stopCheck)
	<-s.checkDone
	// The op-storm check: no incarnation made more store calls within one
	// term than its budget, in any phase (a busy loop, retries without
	// backoff).
	for _, p := range append(append(procs, watchers...), resolvers...) {
		p.mu.Lock()
		worst := 0
		for _, n := range p.opsByTerm {
			worst = max(worst, n)
		}
		p.mu.Unlock()
		budget := s.opBudget(p)
		s.mu.Lock()
		s.stats.MaxOpsShare = max(s.stats.MaxOpsShare, float64(worst)/float64(budget))
		s.mu.Unlock()
	}
}

// opBudget is the most store calls one participant may make in one
// term-length window, in any phase: the design's budget (a leader's 2
// writes, a waiting candidate's read per poll interval, a watcher's read
// per poll interval and at each expiry), plus the retries that failures
// cause, each backed off (from Term/128 for a candidate's reads, Term/64
// for writes, PollInterval for a failed push channel), with a factor for
// faults that strike every call.
func (s *sim) opBudget(p *proc) int {
	sc := s.sc
	poll := sc.pollInterval()
	if p.watcher >= 0 || p.isResolver {
		poll = sc.WatchPoll
	}
	design := 2 + 2*int(sc.Term/poll)
	if p.isResolver {
		// And the reads ResolveNow asks for, at most 4 a term.
		design += 4
	}
	return 8*design + 60
}

// refusalEnded checks a candidate whose Acquire ended on a refusal: the
// store did refuse it (the sim's fault), and Acquire returned promptly:
// within a term of the refusal, or of the end of OnElected if it was
// leading, or of the pause that spaces out tenures. The slot stays down
// until a scheduled restart or the end of the faults.
func (s *sim) refusalEnded(p *proc) {
	at := time.Now()
	p.mu.Lock()
	refusedAt := p.refusedAt
	thaw := p.lastThaw
	p.mu.Unlock()
	if refusedAt.IsZero() {
		s.violate("acquire-error", "%s: Acquire reports a refusal the store never made: %v", p, p.err)
		return
	}
	from := maxTime(refusedAt, thaw)
	s.mu.Lock()
	for _, tn := range s.tenures {
		if tn.p == p && tn.ended.After(from) {
			from = tn.ended
		}
	}
	if s.slots[p.slot] == p {
		s.slots[p.slot] = nil
	}
	s.stats.Refusals++
	s.stats.MaxRefusalEnd = max(s.stats.MaxRefusalEnd, at.Sub(refusedAt))
	s.mu.Unlock()
	if late := at.Sub(from); late > 16*s.sc.Term+s.sc.Term/2 {
		s.violate("refusal-slow", "%s: Acquire returned %v after the store refused it for good", p, late)
	}
}
