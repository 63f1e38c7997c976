package gcs_test

import (
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

var electionTiming = racedecidertest.Timing{TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond}

// electionEmulator starts an emulator and returns its address and a
// faultproxy.NewDecider on one fresh object, each decider with its own
// storage client, so that cutting one candidate's proxy cuts exactly its
// access to the store.
func electionEmulator(t *testing.T) (string, faultproxy.NewDecider) {
	em := newEmulator(t)
	object := freshObject(t)
	return em.addr, func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		return newDecider(t, newClient(t, proxyAddr), object)
	}
}

// TestElection runs a full election over the emulator: three candidates and
// a watcher, each reaching the emulator through its own fault proxy.
func TestElection(t *testing.T) {
	upstream, nd := electionEmulator(t)
	faultproxy.RunElection(t, upstream, nd, electionTiming)
}

// TestElectionWithFaults runs candidates through a misbehaving network and
// checks safety throughout, with the leader disrupted six times: see
// faultproxy.RunElectionUnderFaults.
func TestElectionWithFaults(t *testing.T) {
	upstream, nd := electionEmulator(t)
	faultproxy.RunElectionUnderFaults(t, upstream, nd, faultproxy.ElectionFaults{Timing: electionTiming, Disruptions: 6})
}
