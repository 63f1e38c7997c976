package leotel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// TestLeaderWhileFollowed: a watcher's leaderelection.leader{leader_id}
// gauge is no longer reported once Watch has returned: the leader it names
// may be long gone.
func TestLeaderWhileFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := racedecidertest.NewMonitor(t)
		p := newProcess(t, "watcher")
		wctx, stopWatch := context.WithCancel(t.Context())
		done := make(chan error, 1)
		w := leaderelection.WatchConfig{Decider: mem, MaxClockSkew: skew, Observer: p.obs}
		go func() { done <- w.Watch(wctx, func(context.Context, leaderelection.Change) {}) }()
		a := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: mem, LeaderID: "a", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("a")})
		m.Next(time.Hour)
		time.Sleep(term)
		synctest.Wait()
		p.want(t, "leaderelection.leader", eq(1), "1 while watching", "leader_id", "a")
		stopWatch()
		<-done
		a.Stop(t)
		time.Sleep(time.Minute)
		if v, found := p.value(t, "leaderelection.leader", "leader_id", "a"); found {
			t.Errorf("a minute after Watch returned (and a released): leader{leader_id=a} = %v, want no data point", v)
		}
	})
}

// TestStandbyIsLeaderPoint: a candidate that has not led reports is_leader
// 0, so that a sum over an election's candidates has input when its
// leader's process is gone.
func TestStandbyIsLeaderPoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := racedecidertest.NewMonitor(t)
		a := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: mem, LeaderID: "a", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("a")})
		m.Next(time.Hour)
		p := newProcess(t, "b")
		b := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: mem, LeaderID: "b", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("b"), Observer: p.obs})
		time.Sleep(2 * term)
		synctest.Wait()
		p.want(t, "leaderelection.is_leader", eq(0), "a data point at 0 for a campaigning standby")
		b.Stop(t)
		a.Stop(t)
	})
}

// TestStaleTenureEventsIgnored: in a process that runs a candidate and a
// watcher on one Observer, the watcher may report the previous tenure's
// extension and expiry after the candidate reported the next tenure. Those
// do not take fencing_token back, nor name the old leader, nor leave no
// leader; the end of the newest tenure does.
func TestStaleTenureEventsIgnored(t *testing.T) {
	p := newProcess(t, "candidate and watcher")
	const el = "mem://x"
	t0 := time.Unix(1_800_000_000, 0)
	p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventStarted, Election: el, LeaderID: "c"})
	p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventLeaderChanged, Election: el, LeaderID: "b", Term: 2, Expiry: t0.Add(time.Minute)})
	for _, c := range []leaderelection.ChangeKind{leaderelection.TermExtended, leaderelection.TermExpired} {
		p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventWatchChange, Election: el, Change: c, LeaderID: "a", Term: 1, Expiry: t0})
		p.want(t, "leaderelection.fencing_token", eq(2), "term 2's after term 1 "+c.String())
		p.want(t, "leaderelection.term.expiry", eq(float64(t0.Add(time.Minute).Unix())), "term 2's after term 1 "+c.String())
		p.want(t, "leaderelection.leader", eq(1), "b after term 1 "+c.String(), "leader_id", "b")
		if v, found := p.value(t, "leaderelection.leader", "leader_id", "a"); found {
			t.Errorf("after term 1 %v: leader{leader_id=a} = %v, want no data point", c, v)
		}
	}
	p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventWatchChange, Election: el, Change: leaderelection.LeaderReleased, LeaderID: "b", Term: 2, Expiry: t0})
	if v, found := p.value(t, "leaderelection.leader", "leader_id", "b"); found {
		t.Errorf("after term 2 was released: leader{leader_id=b} = %v, want no data point", v)
	}
	// The end of a tenure never seen begun is the newest tenure seen;
	// the candidate's late report of the one before it is stale.
	p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventWatchChange, Election: el, Change: leaderelection.LeaderReleased, LeaderID: "d", Term: 4, Expiry: t0})
	p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventLeaderChanged, Election: el, LeaderID: "c", Term: 3, Expiry: t0.Add(time.Minute)})
	p.want(t, "leaderelection.fencing_token", eq(4), "term 4's after term 4 released, then term 3 reported")
	if v, found := p.value(t, "leaderelection.leader", "leader_id", "c"); found {
		t.Errorf("term 4 released, then term 3 reported: leader{leader_id=c} = %v, want no data point", v)
	}
	// Once the election is no longer followed, the next tenure seen is
	// taken, whatever its Term (a record made anew).
	p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventStopped, Election: el, LeaderID: "c"})
	p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventStarted, Election: el, LeaderID: "c"})
	p.obs.Observe(leaderelection.Event{Kind: leaderelection.EventLeaderChanged, Election: el, LeaderID: "e", Term: 1, Expiry: t0})
	p.want(t, "leaderelection.fencing_token", eq(1), "term 1's once followed anew")
	p.want(t, "leaderelection.leader", eq(1), "e once followed anew", "leader_id", "e")
}

// TestIsLeaderAcrossAcquires: is_leader is 1 while any tenure of this
// process runs, when two Acquires of it campaign on one election: the
// other's start and return do not take it to 0.
func TestIsLeaderAcrossAcquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := racedecidertest.NewMonitor(t)
		p := newProcess(t, "a and b")
		cfg := func(id string) leaderelection.Config {
			return leaderelection.Config{Decider: mem, LeaderID: id, TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected(id), Observer: p.obs}
		}
		a := racedecidertest.StartCandidate(t.Context(), cfg("a"))
		m.Next(time.Hour)
		b := racedecidertest.StartCandidate(t.Context(), cfg("b"))
		time.Sleep(term)
		synctest.Wait()
		p.want(t, "leaderelection.is_leader", eq(1), "1 with a leading, b waiting")
		b.Stop(t)
		synctest.Wait()
		p.want(t, "leaderelection.is_leader", eq(1), "1 with a leading, b returned")
		a.Stop(t)
		synctest.Wait()
		p.want(t, "leaderelection.is_leader", eq(0), "0 once both returned")
	})
}

// TestTenureGaugesGoneWhenNotFollowed: once the last Acquire or Watch of
// the process on an election returns, what it saw there (fencing token,
// expiry, clock offset) is no longer reported; is_leader stays, at 0.
func TestTenureGaugesGoneWhenNotFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := racedecidertest.NewMonitor(t)
		p := newProcess(t, "a")
		a := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: memory.NewDecider(), LeaderID: "a", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("a"), Observer: p.obs})
		m.Next(time.Hour)
		time.Sleep(term)
		synctest.Wait()
		gauges := []string{"leaderelection.fencing_token", "leaderelection.term.expiry", "leaderelection.clock.offset"}
		for _, g := range gauges {
			if _, found := p.value(t, g); !found {
				t.Errorf("while a leads: no %s data point", g)
			}
		}
		a.Stop(t)
		synctest.Wait()
		for _, g := range gauges {
			if v, found := p.value(t, g); found {
				t.Errorf("after the Acquire returned: %s = %v, want no data point", g, v)
			}
		}
		p.want(t, "leaderelection.is_leader", eq(0), "a data point at 0 after the Acquire returned")
	})
}
