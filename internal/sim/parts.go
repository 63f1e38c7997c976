package sim

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/legrpc"
)

// This file drives the parts beyond Acquire: legrpc Guards serving calls,
// and WatchConfig.Watch observers; and holds the checks on the engine's
// callbacks (OnOusting, LeaderChanged) and on refusals.

// attachGuard wires a legrpc.Guard into cfg, as a server would.
func (p *proc) attachGuard(cfg leaderelection.Config) leaderelection.Config {
	if !p.s.opt.GuardNoDrain {
		return p.guard.Attach(cfg)
	}
	// The broken Guard of a negative control: OnElected returns as soon
	// as the worker does, while the Guard drains on behind the engine's
	// back.
	inner := cfg.OnElected
	var userDone chan struct{}
	cfg.OnElected = func(ctx context.Context, tv *leaderelection.TimeView) {
		inner(ctx, tv)
		close(userDone)
	}
	cfg = p.guard.Attach(cfg)
	guarded := cfg.OnElected
	cfg.OnElected = func(ctx context.Context, tv *leaderelection.TimeView) {
		userDone = make(chan struct{})
		done := userDone
		go guarded(ctx, tv)
		<-done
	}
	return cfg
}

// serveCalls sends calls to the process's Guard, as clients would, until
// its Acquire ends. An admitted call works for a while; when the leadership
// ends (its context does), it finishes up within Term/32 and returns.
func (p *proc) serveCalls() {
	sc := p.s.sc
	r := newStream(sc.Seed, p.slot, p.inc, callStream)
	ic := p.guard.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/sim.Leader/Act"}
	for {
		if !p.simClock.SleepFor(p.ctx, r.uniform(sc.Term/32, sc.Term/4)) || p.dead.Load() {
			return
		}
		// Drawn here, in order, not on the call's goroutine.
		work, finish := r.uniform(sc.Term/16, sc.Term/2), r.uniform(0, sc.Term/32)
		go func() {
			_, _ = ic(context.Background(), nil, info, func(hctx context.Context, _ any) (any, error) {
				tv, _ := legrpc.TimeViewFromContext(hctx)
				term := tv.Term()
				p.beginCall(term)
				defer p.endCall(term)
				p.s.count("guarded-call")
				if !p.simClock.SleepFor(hctx, work) {
					p.simClock.SleepFor(context.Background(), finish)
				}
				return nil, nil
			})
		}()
	}
}

// checkRelease: a release is sent only once nothing acts on behalf of the
// tenure (no guarded call, no long action of the worker).
func (s *sim) checkRelease(p *proc, e *entry.RaceEntry) {
	if n := p.running(e.Term); n > 0 {
		s.violate("release-under-call", "%s sends the release of term %d while %d calls or actions admitted under it still run", p, e.Term, n)
	}
}

// ousting checks an OnOusting call: after OnElected has returned, once per
// tenure.
func (s *sim) ousting(p *proc) {
	at := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var last *tenure
	for i := len(s.tenures) - 1; i >= 0; i-- {
		if s.tenures[i].p == p {
			last = s.tenures[i]
			break
		}
	}
	switch {
	case last == nil:
		s.violateLocked(at, "ousting", fmt.Sprintf("%s: OnOusting with no tenure", p))
		return
	case last.ended.IsZero():
		s.violateLocked(at, "ousting", fmt.Sprintf("%s: OnOusting before OnElected returned (term %d)", p, last.term))
	case last.ousted > 0:
		s.violateLocked(at, "ousting", fmt.Sprintf("%s: OnOusting again for term %d", p, last.term))
	}
	last.ousted++
}

// leaderChanged checks a LeaderChanged call: once per tenure, in order.
func (s *sim) leaderChanged(p *proc, term int64) {
	p.mu.Lock()
	prev := int64(-1)
	if n := len(p.changed); n > 0 {
		prev = p.changed[n-1]
	}
	p.changed = append(p.changed, term)
	p.mu.Unlock()
	if term <= prev {
		s.violate("leader-changed", "%s: LeaderChanged reports term %d after term %d", p, term, prev)
	}
}

func (p *proc) reported(term int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.changed {
		if t == term {
			return true
		}
	}
	return false
}

// report is one Change a watcher reported.
type report struct {
	at time.Duration
	c  leaderelection.Change
}

// startWatcher starts watcher k: WatchConfig.Watch on its own clock and
// store access, until the shutdown.
func (s *sim) startWatcher(k int) *proc {
	sc := s.sc
	slot := sc.N + k
	p := s.newProc(slot, 1, fmt.Sprintf("w%d", k), newHostClock(s.start, sc.WatchOffsets[k], 0))
	p.watcher, p.clean = k, sc.CleanWatcher[k]
	var d leaderelection.RaceDecider = &access{st: s.st, p: p}
	if sc.Notifier {
		d = pushAccess{&access{st: s.st, p: p}}
	}
	// Watch draws its retry jitter from this source: a watcher's failing
	// reads replay too.
	ctx, cancel := context.WithCancel(s.engineContext(incarnationRand(sc.Seed, slot, 1, engineStream)))
	p.ctx, p.cancel = ctx, cancel
	s.mu.Lock()
	s.watchers = append(s.watchers, p)
	s.byID[p.id] = p
	s.mu.Unlock()
	wc := leaderelection.WatchConfig{
		Decider:      d,
		MaxClockSkew: sc.Skew,
		PollInterval: sc.WatchPoll,
		Clock:        p.clock,
		OnError: func(_ context.Context, err error) {
			s.event(p.id, "watch error: %v", err)
		},
	}
	s.event(p.id, "watches (poll %v, clean %v)", sc.WatchPoll, p.clean)
	go func() {
		p.err = wc.Watch(ctx, func(_ context.Context, c leaderelection.Change) { s.watchReport(p, c) })
		close(p.done)
	}()
	return p
}

// watchReport records and checks one of a watcher's reports: they come in
// order (election numbers go up; an expiry or a deletion concerns the last
// record reported), and none names as current a leader whose term had
// ended, on the watcher's clock, when the store served the record.
func (s *sim) watchReport(p *proc, c leaderelection.Change) {
	if s.opt.WatchDrop {
		return
	}
	s.recordReport(p, c)
	if s.opt.WatchReplay {
		p.mu.Lock()
		n := len(p.reports)
		var prev leaderelection.Change
		if n >= 2 {
			prev = p.reports[n-2].c
		}
		p.mu.Unlock()
		if n >= 2 {
			s.recordReport(p, prev)
		}
	}
}

func (s *sim) recordReport(p *proc, c leaderelection.Change) {
	s.event(p.id, "watch reports %s %s", c.Kind, s.fmtRecord(&c.Entry))
	p.mu.Lock()
	var last *leaderelection.Change // the last report of a record
	for i := len(p.reports) - 1; i >= 0; i-- {
		if p.reports[i].c.Kind != leaderelection.RecordDeleted {
			last = &p.reports[i].c
			break
		}
	}
	readAt, seen := p.readClock[recKey(&c.Entry)]
	p.reports = append(p.reports, report{at: s.now(), c: c})
	staleAbsent, staleRun := p.staleAbsent, p.staleAbsentRun
	p.mu.Unlock()
	e := &c.Entry
	switch c.Kind {
	case leaderelection.LeaderElected, leaderelection.TermExtended, leaderelection.LeaderReleased:
		if last != nil && !e.NewerThan(&last.Entry) {
			s.violate("watch-order", "%s reports %s of term %d election %d after term %d election %d", p, c.Kind, e.Term, e.ElectionNumber, last.Entry.Term, last.Entry.ElectionNumber)
		}
		if c.Kind != leaderelection.LeaderReleased && seen && !e.TermExpiry.After(readAt) {
			s.violate("watch-reports-ended-term", "%s reports %s %s as current, but its term had ended when the store served it (watcher's clock %s)",
				p, c.Kind, s.fmtRecord(e), s.fmtLocal(readAt))
		}
	case leaderelection.TermExpired:
		// The last record reported, or a newer one whose term had ended
		// when it was read.
		if last != nil && last.Entry.NewerThan(e) {
			s.violate("watch-order", "%s reports %s of term %d election %d after term %d election %d", p, c.Kind, e.Term, e.ElectionNumber, last.Entry.Term, last.Entry.ElectionNumber)
		}
	case leaderelection.RecordDeleted:
		if last == nil || last.Entry.Term != e.Term || last.Entry.ElectionNumber != e.ElectionNumber {
			s.violate("watch-order", "%s reports %s of election %d, not the last record it reported", p, c.Kind, e.ElectionNumber)
		}
		switch {
		case !staleAbsent || s.deletedSince(p):
		case staleRun >= watchAbsenceReads:
			// Watch's documented limit: as many stale reads in a row as
			// it takes to confirm an absence.
			s.event("check", "%s reports a deletion after %d stale reads of no record in a row (the documented limit)", p, staleRun)
			s.mu.Lock()
			s.stats.FalseDeletions++
			s.mu.Unlock()
		default:
			s.violate("watch-false-deletion", "%s reports a deletion on a stale read of no record (the record exists), %d stale reads in a row", p, staleRun)
		}
	}
}

// deletedSince reports whether the store really deleted a record since
// watcher p last reported one: its confirming reads may then end on a
// stale one, and the deletion it reports is still news.
func (s *sim) deletedSince(p *proc) bool {
	p.mu.Lock()
	var term int64 = -1
	for i := len(p.reports) - 2; i >= 0; i-- { // the last is the deletion
		if p.reports[i].c.Kind != leaderelection.RecordDeleted {
			term = p.reports[i].c.Entry.Term
			break
		}
	}
	p.mu.Unlock()
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	// A deletion after the tenure of the record last reported, whenever
	// the watcher learnt of it (a stale read may have shown that record,
	// even its expiry, after it was gone).
	seen := false
	for _, sp := range s.st.spans {
		switch {
		case !sp.deleted && sp.term == term:
			seen = true
		case sp.deleted && seen:
			return true
		}
	}
	return false
}

// checkWatchCoverage checks what each clean watcher (one whose store
// access has no faults) reported up to until: every tenure whose record
// was stored for longer than the watcher's poll interval (plus round
// trips), and every deletion, of a record it had reported, that lasted as
// long.
func (s *sim) checkWatchCoverage(until time.Duration) {
	sc := s.sc
	bound := sc.WatchPoll + 4*quietLatency
	s.st.mu.Lock()
	spans := append([]span(nil), s.st.spans...)
	s.st.mu.Unlock()
	s.mu.Lock()
	watchers := append([]*proc(nil), s.watchers...)
	s.mu.Unlock()
	for _, w := range watchers {
		if !w.clean {
			continue
		}
		w.mu.Lock()
		reps := append([]report(nil), w.reports...)
		w.mu.Unlock()
		reported := func(term int64) bool {
			for _, r := range reps {
				if r.c.Kind != leaderelection.RecordDeleted && r.c.Entry.Term == term {
					return true
				}
			}
			return false
		}
		for i, sp := range spans {
			if sp.deleted && (i == 0 || !reported(spans[i-1].term)) {
				// A deletion is news only to a watcher that saw the
				// record deleted.
				continue
			}
			to := sp.to
			if to == 0 {
				to = until
			}
			b := bound
			if sp.deleted {
				// Watch confirms an absence with two more reads, backed
				// off up to PollInterval/16 and /8.
				b += sc.WatchPoll*3/16 + 4*quietLatency
			}
			if to > until || to-sp.from <= b || (sp.term < 0 && !sp.deleted) {
				continue
			}
			found := false
			for _, r := range reps {
				if sp.deleted && r.c.Kind == leaderelection.RecordDeleted && r.at >= sp.from && r.at <= to+b ||
					!sp.deleted && r.c.Kind != leaderelection.RecordDeleted && r.c.Entry.Term == sp.term {
					found = true
					break
				}
			}
			switch {
			case found:
				s.mu.Lock()
				s.stats.WatchCovered++
				s.mu.Unlock()
			case sp.deleted:
				s.violate("watch-missed", "%s never reported the deletion at %v, which lasted %v (poll %v)", w, fmtDur(sp.from), to-sp.from, sc.WatchPoll)
			default:
				s.violate("watch-missed", "%s never reported term %d, stored from %v for %v (poll %v)", w, sp.term, fmtDur(sp.from), to-sp.from, sc.WatchPoll)
			}
		}
	}
}

// watchAbsenceReads is how many reads in a row Watch takes to confirm that
// the record is gone (leaderelection's absenceReads).
const watchAbsenceReads = 3
