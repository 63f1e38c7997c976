package postgres_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

var electionTiming = racedecidertest.Timing{TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond}

// TestElection runs a full election on the server: three candidates and a
// watcher, each with its own pool reaching the server through its own fault
// proxy, so that cutting one candidate's proxy cuts exactly its access,
// listener included.
func TestElection(t *testing.T) {
	dsn := serverDSN(t)
	table := freshTable(t, newPool(t, dsn, 1))
	election := freshName("election")
	racedecidertest.RunElection(t, func(t *testing.T, candidate int) racedecidertest.Access {
		p := faultproxy.Start(t, hostPort(t, dsn))
		d := newDecider(t, newPool(t, withHost(t, dsn, p.Addr()), 4), table, election)
		return racedecidertest.Access{Decider: d, Cut: p.SetCut}
	}, electionTiming)
}

// TestElectionWithFaults runs candidates through a misbehaving network and
// checks safety throughout: at every election the Monitor checks that no
// other candidate holds a valid TimeView and that the fencing token went up.
// Every proxy adds latency, and every 100ms one of them, at random, loses the
// answer to its next request after the server acted on it (an ambiguous
// write when the request is a write) or resets its next connection before
// forwarding anything. Meanwhile the leader is disrupted four times, taking
// turns: stopped gracefully (then restarted as a new incarnation), or cut off
// from the server (then restored once another candidate took over).
func TestElectionWithFaults(t *testing.T) {
	const disruptions = 4
	dsn := serverDSN(t)
	term, skew := electionTiming.TermLength, electionTiming.MaxClockSkew
	patience := 5*term + 4*skew
	table := freshTable(t, newPool(t, dsn, 1))
	election := freshName("election")
	m := racedecidertest.NewMonitor(t)

	proxies := make([]*faultproxy.Proxy, 3)
	candidates := make([]*racedecidertest.Candidate, 3)
	slot := map[string]int{} // candidate id -> index
	start := func(i, incarnation int) {
		id := fmt.Sprintf("candidate-%d.%d", i, incarnation)
		slot[id] = i
		candidates[i] = racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider:      newDecider(t, newPool(t, withHost(t, dsn, proxies[i].Addr()), 4), table, election),
			LeaderID:     id,
			TermLength:   term,
			MaxClockSkew: skew,
			OnElected:    m.OnElected(id),
		})
	}
	for i := range proxies {
		proxies[i] = faultproxy.Start(t, hostPort(t, dsn))
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
	for d := range disruptions {
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
				t.Fatalf("%s re-elected while its access to the server was cut", leader.ID)
			}
			proxies[i].SetCut(false)
			leader = next
		}
		t.Logf("disruption %d: %s leads with term %d", d+1, leader.ID, leader.Term)
	}

	close(stop)
	armed := <-injected
	var st faultproxy.Stats
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
