package gcs_test

import (
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

var electionTiming = racedecidertest.Timing{TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond}

// TestElection runs a full election over the emulator: three candidates and
// a watcher, each with its own storage client reaching the emulator through
// its own fault proxy, so that cutting one candidate's proxy cuts exactly its
// access to the store.
func TestElection(t *testing.T) {
	em := newEmulator(t)
	object := freshObject(t)
	faultproxy.RunElection(t, em.addr, func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		return newDecider(t, newClient(t, proxyAddr), object)
	}, electionTiming)
}

// TestElectionWithFaults runs candidates through a misbehaving network and
// checks safety throughout, with the leader disrupted six times: see
// faultproxy.RunElectionUnderFaults.
func TestElectionWithFaults(t *testing.T) {
	em := newEmulator(t)
	object := freshObject(t)
	faultproxy.RunElectionUnderFaults(t, em.addr, func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
		return newDecider(t, newClient(t, proxyAddr), object)
	}, faultproxy.ElectionFaults{Timing: electionTiming, Disruptions: 6})
}
