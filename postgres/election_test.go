package postgres_test

import (
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
	faultproxy.RunElection(t, hostPort(t, dsn), func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		return newDecider(t, newPool(t, withHost(t, dsn, proxyAddr), 4), table, election)
	}, electionTiming)
}

// TestElectionWithFaults runs candidates through a misbehaving network and
// checks safety throughout, with the leader disrupted four times: see
// faultproxy.RunElectionUnderFaults.
func TestElectionWithFaults(t *testing.T) {
	dsn := serverDSN(t)
	table := freshTable(t, newPool(t, dsn, 1))
	election := freshName("election")
	faultproxy.RunElectionUnderFaults(t, hostPort(t, dsn), func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		return newDecider(t, newPool(t, withHost(t, dsn, proxyAddr), 4), table, election)
	}, faultproxy.ElectionFaults{Timing: electionTiming, Disruptions: 4})
}
