package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
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
	// files, in a run on the file backend, are the real file backend's
	// Deciders for one record under several names (symlinks to its
	// directory and to the file); each incarnation writes through one of
	// them. They replace mem, which then only serves pushes (none: a
	// file run has no notifier).
	files    []*file.Decider
	filePath string

	mu sync.Mutex
	// acc guards accepted.
	acc sync.Mutex
	// accepted holds, per (LeaderID, Term), every TermExpiry the store
	// accepted: a TimeView may only ever hold one of these.
	accepted map[tenureKey]map[time.Time]bool
	maxTerm  int64
	// applied holds the WriteID of every write applied: one applied
	// again is a late copy of it (see apply).
	applied  map[string]bool
	writes   int // applied writes
	inflight sync.WaitGroup
	// holder is the incarnation that wrote the stored record (LeaderIDs
	// may be reused, so the record's own cannot tell); createdAt is when
	// a record was last created where none existed.
	holder    *proc
	createdAt time.Time
	// past holds the records stored lately, for stale reads.
	past []pastRecord
	// spans is every stretch of time during which one tenure's record (or
	// none) was stored: what watchers must report.
	spans []span
	// creating counts the writes of a record where none exists (token
	// zero) still on their way: see remove.
	creating int
	// commits is when each version was committed (virtual time), the
	// store's clock reading it reports (see sim.reportedCommit).
	commits map[string]time.Time
}

// span is a stretch of virtual time during which the store held a record
// of one term (term -1: no record; deleted: because it was deleted).
type span struct {
	term     int64
	deleted  bool
	from, to time.Duration // to is 0 while it lasts
}

type pastRecord struct {
	from time.Time // stored from then on
	rec  *entry.RaceEntry
}

// remember logs the record now stored, for stale reads and watchers.
// Called with mu held.
func (st *store) remember(deleted bool) {
	rec, err := st.read()
	if err != nil {
		return
	}
	term := int64(-1)
	if rec.ElectionNumber != entry.NoElections {
		term = rec.Term
	}
	if n := len(st.spans); n == 0 || st.spans[n-1].term != term || deleted {
		now := st.s.now()
		if n > 0 {
			st.spans[n-1].to = now
		}
		st.spans = append(st.spans, span{term: term, deleted: deleted, from: now})
	}
	st.past = append(st.past, pastRecord{time.Now(), rec})
	if len(st.past) > 64 {
		st.past = st.past[len(st.past)-64:]
	}
}

// asOf returns the record as it was at t (the oldest remembered if t is
// before them all).
func (st *store) asOf(t time.Time) *entry.RaceEntry {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := len(st.past) - 1; i >= 0; i-- {
		if !st.past[i].from.After(t) || i == 0 {
			return st.past[i].rec.Clone()
		}
	}
	rec, _ := st.read()
	return rec
}

// holderProc returns the incarnation that wrote the stored record.
func (st *store) holderProc() *proc {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.holder
}

// remove deletes the record, if one exists and was created long enough ago
// for the engine's numbering to stay above it (see newTenureNumber: a
// record created where none exists is numbered from its writer's clock in
// Unix microseconds, which may be MaxClockSkew behind). It returns the
// deleted record and the incarnation that wrote it.
func (st *store) remove() (*entry.RaceEntry, *proc, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	rec, err := st.read()
	if err != nil || rec.ElectionNumber == entry.NoElections || time.Since(st.createdAt) < 2*s.sc.Skew+s.sc.Term/4 {
		return nil, nil, false
	}
	if st.creating > 0 {
		// A create sent before this record existed (numbered from its
		// writer's clock then) could land after the deletion, below the
		// deleted record's term: outside the condition above, which the
		// engine's numbering needs.
		return nil, nil, false
	}
	if st.files != nil {
		if err := os.Remove(st.filePath); err != nil {
			s.violate("file-backend", "deleting %s: %v", st.filePath, err)
		}
	} else {
		st.mem.Delete()
	}
	h := st.holder
	st.holder = nil
	st.remember(true)
	s.event("store", "DELETED %s", s.fmtRecord(rec))
	return rec, h, true
}

type tenureKey struct {
	id   string
	term int64
}

func newStore(s *sim) *store {
	st := &store{s: s, mem: memory.NewDecider(), accepted: map[tenureKey]map[time.Time]bool{}, maxTerm: -1, applied: map[string]bool{}, commits: map[string]time.Time{}}
	st.remember(false)
	return st
}

// current returns the stored record (for the orchestrator and checks).
func (st *store) current() *entry.RaceEntry {
	st.mu.Lock()
	defer st.mu.Unlock()
	rec, _ := st.read()
	return rec
}

// read reads the stored record. Called with mu held.
func (st *store) read() (*entry.RaceEntry, error) {
	if st.files != nil {
		rec, err := st.files[0].ReadCurrent(context.Background())
		if err != nil {
			st.s.violate("file-backend", "reading %s: %v", st.files[0], err)
		}
		return rec, err
	}
	return st.mem.ReadCurrent(context.Background())
}

// write applies e through p's name for the record. Called with mu held.
func (st *store) write(p *proc, e *entry.RaceEntry) (entry.LeaderToken, error) {
	if st.files != nil {
		return st.files[p.slot%len(st.files)].WriteEntry(context.Background(), e)
	}
	return st.mem.WriteEntry(context.Background(), e)
}

// openFiles sets the store up on the real file backend in dir: one record
// under three names.
func (st *store) openFiles(dir string) error {
	real := filepath.Join(dir, "shared")
	if err := os.Mkdir(real, 0o755); err != nil {
		return err
	}
	if err := os.Symlink("shared", filepath.Join(dir, "state")); err != nil {
		return err
	}
	if err := os.Symlink("election", filepath.Join(real, "alias")); err != nil {
		return err
	}
	for _, name := range []string{"shared/election", "state/election", "shared/alias"} {
		d, err := file.NewDecider(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		st.files = append(st.files, d)
	}
	st.filePath = filepath.Join(real, "election")
	return nil
}

// stored returns the stored record, the incarnation that wrote it, and when
// (virtual time) it was committed.
func (st *store) stored() (*entry.RaceEntry, *proc, time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	rec, _ := st.read()
	if rec == nil {
		return nil, nil, time.Time{}
	}
	return rec, st.holder, st.commits[rec.Token.Version]
}

// commitTime is the commit time the store reports for version.
func (st *store) commitTime(version string) time.Time {
	st.mu.Lock()
	c := st.commits[version]
	st.mu.Unlock()
	return st.s.reportedCommit(c)
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
	prev, err := st.read()
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
		if s.opt.ResetFencing && prev.ElectionNumber == entry.NoElections {
			// The broken backend of a negative control: it numbers a
			// created record from 1, as if deletion reset fencing.
			e = e.Clone()
			e.ElectionNumber, e.Term = 1, 1
		}
		if tok, err = st.write(p, e); err != nil {
			if st.files != nil {
				s.violate("file-backend", "%s refused %s conditioned on the stored version: %v", st.files[p.slot%len(st.files)], s.fmtRecord(e), err)
			}
			return tok, err
		}
	}
	st.writes++
	st.commits[tok.Version] = time.Now()
	replay := e.WriteID != "" && st.applied[e.WriteID]
	st.applied[e.WriteID] = true
	prevHolder := st.holder
	st.holder = p
	if prev.ElectionNumber == entry.NoElections {
		st.createdAt = time.Now()
	}
	st.remember(false)
	key := tenureKey{p.id, e.Term}
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
		// A late copy of a create that was applied (an SDK's retry still
		// on the wire) can land again only where no record is, after a
		// deletion: it brings back that same tenure, with the expiry it
		// was first written with, and begins none. Candidates that saw
		// the record wait out a whole term after it disappeared whatever
		// comes back (see the engine's observe).
		if e.Term <= st.maxTerm && !(replay && prev.ElectionNumber == entry.NoElections) {
			s.violate("fencing", "new tenure with term %d after term %d", e.Term, st.maxTerm)
		}
		st.maxTerm = max(st.maxTerm, e.Term)
		// A takeover: the previous holder must have stopped believing it
		// leads, on its own clock, unless it released.
		if prev.ElectionNumber != entry.NoElections && !prev.Released {
			if h := prevHolder; h != nil {
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

// access is one incarnation's (or one watcher's) way to the store.
type access struct {
	st *store
	p  *proc
	// ops, if set, decides the fate of this access's calls instead of
	// p.ops; own marks a resolver's own reads (see resolverDecider).
	ops *stream
	own bool
	// cloud: a cloud backend's transport calls it (see cloud.go).
	cloud bool
}

func (a *access) stream() *stream {
	if a.ops != nil {
		return a.ops
	}
	return &a.p.ops
}

// pushAccess adds change notifications.
type pushAccess struct{ *access }

var (
	_ leaderelection.RaceDecider    = (*access)(nil)
	_ leaderelection.ChangeNotifier = pushAccess{}
)

// String names the store in the engine's errors.
func (a *access) String() string { return "sim store" }

// faulty reports whether this access meets faults now: a clean watcher
// never does.
func (a *access) faulty() bool { return a.st.s.faultsOn() && !a.p.clean }

// leg is the latency of one leg of an operation.
func (a *access) leg() time.Duration {
	s := a.st.s
	sc := s.sc
	if !a.faulty() {
		return a.stream().uniform(quietLatency/20, quietLatency)
	}
	if now := s.now(); now >= sc.SlowFrom && now < sc.SlowTo {
		// A persistently slow store: round trips near Term/2.
		return a.stream().uniform(sc.Term/5, sc.Term/4)
	}
	if a.stream().float() < sc.PSlow {
		s.count("slow-op")
		if a.p.noFail {
			// Two such legs stay within the watcher's read timeout
			// (10 s), whose expiry would be a failed read.
			return a.stream().uniform(sc.MaxLatency, sc.Term/4)
		}
		return a.stream().uniform(sc.MaxLatency, sc.Term/2)
	}
	return a.stream().uniform(sc.MaxLatency/20, sc.MaxLatency)
}

// chance reports whether a fault of probability prob strikes this op.
func (a *access) chance(prob float64) bool {
	return a.faulty() && a.stream().float() < prob
}

// failChance is chance for a fault that fails the call: never for an
// access whose calls must not fail (see proc.noFail).
func (a *access) failChance(prob float64) bool {
	return !a.p.noFail && a.chance(prob)
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

// refused answers a call with a definite refusal when one is due (a
// scheduled fault): the store did nothing, and says so.
func (a *access) refused(ctx context.Context, op string) error {
	p := a.p
	p.mu.Lock()
	due := p.refuseNext
	p.mu.Unlock()
	if !due || !a.st.s.faultsOn() {
		return nil
	}
	sleepCtx(ctx, 2*a.leg())
	if !a.cloud {
		// Delivered as it is. A cloud backend's answer is delivered
		// only if it reaches the engine as a refusal (see
		// cloudDecider.finish): its client may give up first, and a
		// refused download is a 404 that only the bucket check after it
		// turns into one.
		p.markRefused()
	}
	a.st.s.event(p.id, "its %s is REFUSED (403: permission denied)", op)
	return fmt.Errorf("sim: %s: 403 permission denied: %w", op, entry.ErrRefused)
}

// throttled answers a call with a throttling error (not applied).
func (a *access) throttled(ctx context.Context, op string) error {
	if !a.failChance(a.st.s.sc.PThrottle) {
		return nil
	}
	a.st.s.count("throttled")
	sleepCtx(ctx, 2*a.leg())
	return fmt.Errorf("sim: %s: 429 slow down: %w", op, entry.ErrThrottled)
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
	if p.isResolver && !a.own {
		if !a.holdConfirm(ctx) {
			return nil, a.ctxErr(ctx, "read")
		}
	}
	if err := a.refused(ctx, "read"); err != nil {
		return nil, err
	}
	if err := a.blocked(ctx, "read"); err != nil {
		return nil, err
	}
	if a.failChance(s.sc.PFail) {
		s.count("op-failure")
		sleepCtx(ctx, a.leg())
		return nil, fmt.Errorf("sim: read: %w", errInjected)
	}
	if err := a.throttled(ctx, "read"); err != nil {
		return nil, err
	}
	if !sleepCtx(ctx, a.leg()) {
		return nil, a.ctxErr(ctx, "read")
	}
	rec := a.st.current()
	readClock := p.host.Now()
	lag := time.Duration(0)
	if a.chance(s.sc.PStale) {
		lag = a.stream().uniform(0, s.sc.StaleLag)
	}
	staleAbsent := false
	if lag > 0 {
		if old := a.st.asOf(time.Now().Add(-lag)); old.ElectionNumber != rec.ElectionNumber {
			s.count("stale-read")
			s.event(p.id, "its read is served %v stale", lag)
			staleAbsent = old.ElectionNumber == entry.NoElections
			rec = old
		}
	}
	p.mu.Lock()
	p.staleAbsent = staleAbsent
	p.mu.Unlock()
	if !sleepCtx(ctx, a.leg()) {
		return nil, a.ctxErr(ctx, "read")
	}
	if part, _ := s.partitioned(p.slot); part || a.failChance(s.sc.PLostResponse) {
		s.count("lost-read-response")
		return nil, fmt.Errorf("sim: read: %w", errLostResponse)
	}
	if !a.respond() {
		return nil, errDead
	}
	p.saw(rec, readClock)
	p.mu.Lock()
	if staleAbsent {
		p.staleAbsentRun++
	} else {
		p.staleAbsentRun = 0
	}
	p.mu.Unlock()
	rec.Token.CommitTime = a.st.commitTime(rec.Token.Version)
	if p.isResolver && !a.own {
		a.confirmState(rec)
	}
	s.event(p.id, "read %s", s.fmtRecord(rec))
	return rec, nil
}

func (a *access) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	s, p := a.st.s, a.p
	var zero entry.LeaderToken
	defer func(t0 time.Time) { p.noteWrite(time.Since(t0)) }(time.Now())
	if !p.gate() {
		return zero, errDead
	}
	p.countOp("write")
	s.event(p.id, "sends %s", s.fmtRecord(e))
	if e.Released {
		s.checkRelease(p, e)
	}
	s.checkSkewEnforced(p, e)
	if err := a.refused(ctx, "write"); err != nil {
		return zero, err
	}
	if err := a.blocked(ctx, "write"); err != nil {
		return zero, err
	}
	if a.chance(s.sc.PFail) {
		s.count("op-failure")
		sleepCtx(ctx, a.leg())
		return zero, fmt.Errorf("sim: write: %w", errInjected)
	}
	if err := a.throttled(ctx, "write"); err != nil {
		s.event(p.id, "its write (election %d) is throttled", e.ElectionNumber)
		return zero, err
	}
	send := a.leg()
	if a.chance(s.sc.PLate) {
		send = p.ops.uniform(s.sc.Term/4, maxLateWrite*s.sc.Term)
		s.event(p.id, "its write (election %d) will sit in a queue for %v", e.ElectionNumber, send)
	}
	// Drawn now, on the caller's goroutine, to keep the ops stream in order.
	acceptStale := s.opt.StaleWriteProb > 0 && p.ops.float() < s.opt.StaleWriteProb
	appliedLost := a.chance(s.sc.PAppliedLost)
	e = e.Clone()
	type result struct {
		tok entry.LeaderToken
		err error
	}
	res := make(chan result, 1)
	var mu sync.Mutex
	gaveUp := false
	call := callOf(ctx)
	create := e.Token.IsZero()
	a.st.inflight.Add(1)
	if create {
		a.st.mu.Lock()
		a.st.creating++
		a.st.mu.Unlock()
	}
	go func() {
		defer a.st.inflight.Done()
		if create {
			defer func() {
				a.st.mu.Lock()
				a.st.creating--
				a.st.mu.Unlock()
			}()
		}
		time.Sleep(send)
		tok, err := a.st.apply(p, e, acceptStale)
		if err == nil && call != nil {
			call.mu.Lock()
			call.applied = true
			call.mu.Unlock()
		}
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
	if appliedLost && r.err == nil {
		// A backend's own retry of an applied write meets its own
		// record, and reports a conflict.
		s.count("applied-but-lost")
		if a.cloud {
			// The backend's own retry will meet its own write.
			s.event(p.id, "its write (election %d) was applied but is answered with a server error", e.ElectionNumber)
			r = result{err: errAppliedLost}
		} else {
			s.event(p.id, "its write (election %d) was applied but is reported as a lost race", e.ElectionNumber)
			r = result{err: fmt.Errorf("sim: write: 412 precondition failed (on a retry): %w", entry.ErrRaceLost)}
		}
	}
	if !a.respond() {
		return zero, errDead
	}
	r.tok.CommitTime = a.st.commitTime(r.tok.Version)
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
	if p.silent() {
		// The channel is silent: no push, no error.
		<-ctx.Done()
		return nil, a.ctxErr(ctx, "wait for change")
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
	readClock := p.host.Now()
	if !sleepCtx(ctx, a.leg()) {
		return nil, a.ctxErr(ctx, "wait for change")
	}
	if part, _ := s.partitioned(p.slot); part || p.silent() {
		// The push is lost; the connection stays silent.
		<-ctx.Done()
		return nil, a.ctxErr(ctx, "wait for change")
	}
	if !a.respond() {
		return nil, errDead
	}
	p.saw(rec, readClock)
	p.mu.Lock()
	p.staleAbsentRun = 0 // a push is never stale
	p.mu.Unlock()
	rec.Token.CommitTime = a.st.commitTime(rec.Token.Version)
	s.event(p.id, "pushed %s", s.fmtRecord(rec))
	return rec, nil
}
