package sim

import (
	"fmt"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

// This file checks the engine's checked clocks (Config.Observer,
// EnforceMaxClockSkew): the store reports commit times from its own clock
// (virtual time), and the sim knows every host's true offset to it.

// offsetSlack is what the offset check allows for the clocks' rounding.
const offsetSlack = time.Microsecond

// stepRec is a wall-clock step of a host: from at (virtual) on, its
// readings carry step.
type stepRec struct {
	at   time.Time
	step time.Duration
}

// readingAt is what the host's clock read at virtual instant v, with
// step in force.
func (h *hostClock) readingAt(v time.Time, step time.Duration) time.Time {
	inner := v.Add(h.sk.Offset)
	if h.rate == 1 {
		return inner.Add(step)
	}
	return h.origin.Add(time.Duration(float64(inner.Sub(h.origin))*h.rate) + step)
}

// noteStep records a wall-clock step made now.
func (h *hostClock) noteStep(step time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.steps = append(h.steps, stepRec{time.Now(), step})
}

// offsetRange returns the least and greatest offset of the store's clock
// (virtual time) from this host's over the virtual instants [from, to].
// Between steps the offset is linear in time, so the extremes are at the
// ends and on either side of each step.
func (h *hostClock) offsetRange(from, to time.Time) (lo, hi time.Duration) {
	h.mu.Lock()
	steps := append([]stepRec(nil), h.steps...)
	h.mu.Unlock()
	var cur time.Duration
	i := 0
	for ; i < len(steps) && !steps[i].at.After(from); i++ {
		cur = steps[i].step
	}
	first := true
	at := func(v time.Time, step time.Duration) {
		off := v.Sub(h.readingAt(v, step))
		if first || off < lo {
			lo = off
		}
		if first || off > hi {
			hi = off
		}
		first = false
	}
	at(from, cur)
	for ; i < len(steps) && !steps[i].at.After(to); i++ {
		at(steps[i].at, cur)
		cur = steps[i].step
		at(steps[i].at, cur)
	}
	at(to, cur)
	return lo, hi
}

// observer is a candidate's Config.Observer.
type observer struct{ p *proc }

func (o observer) Observe(e leaderelection.Event) {
	p := o.p
	switch e.Kind {
	case leaderelection.EventClockOffset:
		p.s.clockOffset(p, e.Offset)
	case leaderelection.EventClockWarning:
		p.s.count("clock-warning")
	case leaderelection.EventOusted:
		if e.Reason == leaderelection.OustClockSkew {
			p.s.count("skew-step-down")
			p.s.event(p.id, "steps down for clock skew (term %d)", e.Term)
		}
	}
}

// reportedCommit is the commit time the store reports for a record it
// committed at c (virtual time): at the scenario's precision (truncated),
// none if the scenario's store reports none, and off by
// Options.CommitOffset in that negative control.
func (s *sim) reportedCommit(c time.Time) time.Time {
	p := s.sc.CommitPrecision
	if p == 0 || c.IsZero() {
		return time.Time{}
	}
	return c.Add(s.opt.CommitOffset).Truncate(p).UTC()
}

// clockOffset checks a bound the engine reports on p's clock offset to
// the store's: it must contain the true offset at some instant of the
// window its samples were taken over (each sample bounds the offset at
// the instant the record was committed, and the engine keeps samples
// 8 x TermLength on p's clock; a pause or a stall can put up to 2 terms
// between a sample and its report, and a step of p's clock moves its
// readings by up to the skew).
func (s *sim) clockOffset(p *proc, o leaderelection.ClockOffset) {
	if p.dead.Load() {
		// A crashed process reaped at the end of the run reports what it
		// computed before it froze, arbitrarily long ago (see sim.event).
		return
	}
	sc := s.sc
	now := time.Now()
	hnow := p.host.Now()
	window := 8*sc.Term + 3*sc.Term + sc.Skew
	lo, hi := p.host.offsetRange(now.Add(-window), now)
	bad := o.Low > hi+offsetSlack || o.HighKnown && o.High < lo-offsetSlack
	far := sc.Enforce && p.skew > 0 && o.AtLeast() > p.skew/2
	p.mu.Lock()
	p.sampleAt = append(p.sampleAt, hnow)
	if len(p.sampleAt) > 32 {
		p.sampleAt = p.sampleAt[len(p.sampleAt)-32:]
	}
	p.offset = o
	if far {
		p.farSeen = true
		p.farAt = now
	}
	first := far && !p.farCounted
	p.farCounted = p.farCounted || far
	p.mu.Unlock()
	s.mu.Lock()
	s.stats.OffsetSamples++
	if first {
		s.stats.SkewDetected++
		if p.slot == sc.FarSlot {
			s.stats.FarDetected++
		}
	}
	s.mu.Unlock()
	if bad {
		s.violate("clock-offset", "%s's clock offset bound %s (%d samples) excludes its true offset, %v to %v over the last %v",
			p, o, o.Samples, lo, hi, window)
	}
	if first {
		s.event(p.id, "its clock offset bound %s shows it further than MaxClockSkew/2 (%v) from the store's (true offset %v to %v)", o, p.skew/2, lo, hi)
	}
}

// checkSkewEnforced checks a write p is about to send: with
// EnforceMaxClockSkew, a candidate whose offset bound shows its clock
// further than MaxClockSkew/2 from the store's does not campaign, and a
// leader steps down: neither sends a write of an election number it has
// not tried before (an acquisition or an extension; retries of one tried
// already, and releases, are allowed), while every sample behind that
// bound is recent enough that the engine still holds it.
func (s *sim) checkSkewEnforced(p *proc, e *entry.RaceEntry) {
	sc := s.sc
	if !sc.Enforce || p.skew <= 0 || p.watcher >= 0 || p.isResolver {
		return
	}
	hnow := p.host.Now()
	p.mu.Lock()
	if p.sentEN == nil {
		p.sentEN = map[int64]bool{}
	}
	tried := p.sentEN[e.ElectionNumber]
	p.sentEN[e.ElectionNumber] = true
	o := p.offset
	young := o.Known() && o.Samples <= len(p.sampleAt)
	if young {
		oldest := p.sampleAt[len(p.sampleAt)-o.Samples]
		young = hnow.Sub(oldest) <= 8*sc.Term-3*sc.Term-sc.Skew
	}
	p.mu.Unlock()
	if tried || e.Released || !young || o.AtLeast() <= p.skew/2 {
		return
	}
	what := "acquisition"
	if e.Term != e.ElectionNumber {
		what = "extension"
	}
	s.violate("clock-skew-enforced", "%s sends an %s %s though its clock offset bound %s shows it more than MaxClockSkew/2 (%v) from the store's",
		p, what, s.fmtRecord(e), o, p.skew/2)
}

// steppedDownForSkew reports whether tn's holder learnt during (or right
// at the start of) the tenure that its clock is too far from the store's (it then steps down: its
// TimeView lapses, as it should).
func (tn *tenure) steppedDownForSkew() bool {
	tn.p.mu.Lock()
	defer tn.p.mu.Unlock()
	return tn.p.farSeen && !tn.p.farAt.Before(tn.start)
}

// farSince reports whether p's offset bound last showed it too far from
// the store's clock after t.
func (p *proc) farSince(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.farSeen && p.farAt.After(t)
}

// clockString describes the scenario's checked clocks, for its header.
func (sc *Scenario) clockString() string {
	if sc.CommitPrecision == 0 && !sc.Observed {
		return ""
	}
	s := fmt.Sprintf("  checked clocks: commit times %v, Observer %v, EnforceMaxClockSkew %v", sc.CommitPrecision, sc.Observed, sc.Enforce)
	if sc.FarSlot >= 0 {
		s += fmt.Sprintf(", slot %d's clock beyond MaxClockSkew/2", sc.FarSlot)
	}
	return s + "\n"
}
