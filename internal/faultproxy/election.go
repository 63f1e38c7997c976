package faultproxy

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// NewDecider returns a RaceDecider on the record under test whose client
// reaches the store at proxyAddr ("127.0.0.1:port"), a fault proxy's
// address. It is called once per candidate, and again for each restarted
// incarnation.
type NewDecider func(t *testing.T, proxyAddr string) leaderelection.RaceDecider

// RunElection runs racedecidertest.RunElection with every candidate, and the
// watcher, reaching the store at upstream ("host:port") through a fault proxy
// of its own, so that cutting one candidate's proxy cuts exactly its access
// to the store.
func RunElection(t *testing.T, upstream string, newDecider NewDecider, timing racedecidertest.Timing) {
	racedecidertest.RunElection(t, func(t *testing.T, candidate int) racedecidertest.Access {
		p := Start(t, upstream)
		return racedecidertest.Access{Decider: newDecider(t, p.Addr()), Cut: p.SetCut}
	}, timing)
}

// ElectionFaults is how RunElectionUnderFaults runs.
type ElectionFaults struct {
	Timing racedecidertest.Timing
	// Disruptions is how many times the leader is disrupted.
	Disruptions int
}

// RunElectionUnderFaults runs three candidates through a misbehaving network
// and checks safety throughout: at every election the Monitor checks that no
// other candidate holds a valid TimeView and that the fencing token went up.
// Each candidate reaches the store at upstream ("host:port") through a fault
// proxy of its own. Every proxy adds latency, and every 100ms one of them,
// at random, loses the answer to its next request after the store acted on
// it (an ambiguous write when the request is a write) or resets its next
// connection before forwarding anything. Meanwhile the leader is disrupted
// opts.Disruptions times, taking turns: stopped gracefully (then restarted
// as a new incarnation), or cut off from the store (then restored once
// another candidate took over). At the end, the run must have seen some
// dropped answers and some resets.
//
// Timing-based liveness checks (how fast a handover is) are RunElection's
// job; under this many faults they would be noise.
func RunElectionUnderFaults(t *testing.T, upstream string, newDecider NewDecider, opts ElectionFaults) {
	term, skew := opts.Timing.TermLength, opts.Timing.MaxClockSkew
	// Each election must come, but not fast: a fault is armed on a quiet
	// proxy until its next request, so that after a cut nearly every
	// request of the waiting candidates meets one, each lost answer
	// costing an operation timeout (half a term), and on a loaded machine
	// (CI's race-detector run, 2 cores) five terms were seen to pass.
	patience := 10*term + 4*skew
	m := racedecidertest.NewMonitor(t)

	proxies := make([]*Proxy, 3)
	candidates := make([]*racedecidertest.Candidate, 3)
	slot := map[string]int{} // candidate id -> index
	start := func(i, incarnation int) {
		id := fmt.Sprintf("candidate-%d.%d", i, incarnation)
		slot[id] = i
		candidates[i] = racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider:      newDecider(t, proxies[i].Addr()),
			LeaderID:     id,
			TermLength:   term,
			MaxClockSkew: skew,
			OnElected:    m.OnElected(id),
		})
	}
	for i := range proxies {
		proxies[i] = Start(t, upstream)
		proxies[i].SetLatency(time.Duration(2+3*i) * time.Millisecond)
		start(i, 0)
	}
	defer func() {
		for _, c := range candidates {
			c.Stop(t)
		}
	}()

	stop := make(chan struct{})
	injected := make(chan int)
	go func() {
		n := 0
		defer func() { injected <- n }()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			p := proxies[rand.N(len(proxies))]
			if rand.N(2) == 0 {
				p.DropResponses(1)
			} else {
				p.ResetNext(1)
			}
			n++
		}
	}()

	leader := m.Next(patience)
	for d := range opts.Disruptions {
		i := slot[leader.ID]
		if d%2 == 0 {
			candidates[i].Stop(t)
			if leader.TV.ValueInFuture() {
				t.Errorf("%s's TimeView is still valid after its Acquire returned", leader.ID)
			}
			start(i, d+1)
			leader = m.Next(patience)
		} else {
			proxies[i].SetCut(true)
			next := m.Next(patience)
			if next.ID == leader.ID {
				t.Fatalf("%s re-elected while its access to the store was cut", leader.ID)
			}
			proxies[i].SetCut(false)
			leader = next
		}
		t.Logf("disruption %d: %s leads with term %d", d+1, leader.ID, leader.Term)
	}

	close(stop)
	armed := <-injected
	var st Stats
	for _, p := range proxies {
		s := p.Stats()
		st.Requests += s.Requests
		st.DroppedResponses += s.DroppedResponses
		st.Resets += s.Resets
	}
	t.Logf("%d faults armed; %d requests, %d responses dropped, %d resets", armed, st.Requests, st.DroppedResponses, st.Resets)
	if st.DroppedResponses == 0 || st.Resets == 0 {
		t.Errorf("the run saw %d dropped responses and %d resets; want some of each", st.DroppedResponses, st.Resets)
	}
}
