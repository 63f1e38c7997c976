package postgres_test

import (
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

var electionTiming = racedecidertest.Timing{TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond}

// electionServer returns the server's address and a faultproxy.NewDecider
// on one fresh election, each decider with its own pool, so that cutting one
// candidate's proxy cuts exactly its access, listener included.
func electionServer(t *testing.T) (string, faultproxy.NewDecider) {
	dsn := serverDSN(t)
	table := freshTable(t, newPool(t, dsn, 1))
	election := freshName("election")
	return hostPort(t, dsn), func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		return newDecider(t, newPool(t, withHost(t, dsn, proxyAddr), 4), table, election)
	}
}

// TestElection runs a full election on the server: three candidates and a
// watcher, each reaching the server through its own fault proxy.
func TestElection(t *testing.T) {
	upstream, nd := electionServer(t)
	faultproxy.RunElection(t, upstream, nd, electionTiming)
}

// TestElectionWithFaults runs candidates through a misbehaving network and
// checks safety throughout, with the leader disrupted four times: see
// faultproxy.RunElectionUnderFaults.
func TestElectionWithFaults(t *testing.T) {
	upstream, nd := electionServer(t)
	faultproxy.RunElectionUnderFaults(t, upstream, nd, faultproxy.ElectionFaults{Timing: electionTiming, Disruptions: 4})
}
