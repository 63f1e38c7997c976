package leprom_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/leprom"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// TestLeaderInfoWhileFollowed: leader_info names the leader while an Acquire
// or a Watch of this process follows the election, and not once the last of
// them has returned: the leader it names may be long gone.
func TestLeaderInfoWhileFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := racedecidertest.NewMonitor(t)
		reg := prometheus.NewPedanticRegistry()
		obs, err := leprom.New(reg, leprom.Options{})
		if err != nil {
			t.Fatal(err)
		}
		watch := func() (stop func()) {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			w := leaderelection.WatchConfig{Decider: mem, MaxClockSkew: skew, Observer: obs}
			go func() { done <- w.Watch(ctx, func(context.Context, leaderelection.Change) {}) }()
			return func() {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("Watch: %v", err)
				}
			}
		}
		stop1, stop2 := watch(), watch()
		a := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: mem, LeaderID: "a", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("a")})
		m.Next(time.Hour)
		time.Sleep(term)
		synctest.Wait()
		if ids := leaders(t, reg); len(ids) != 1 || ids[0] != "a" {
			t.Fatalf("two watches: leader_info for %v, want a", ids)
		}
		stop1()
		time.Sleep(term)
		synctest.Wait()
		if ids := leaders(t, reg); len(ids) != 1 || ids[0] != "a" {
			t.Errorf("one watch still running: leader_info for %v, want a", ids)
		}
		stop2()
		a.Stop(t) // a releases, and no watch sees it
		time.Sleep(time.Minute)
		if ids := leaders(t, reg); len(ids) != 0 {
			t.Errorf("a minute after the last Watch returned: leader_info for %v, want none", ids)
		}
	})
}

// TestStandbyIsLeaderSeries: a candidate that has not led has an is_leader
// series at 0, so that sum(leaderelection_is_leader) over an election's
// candidates has input when its leader's process is gone.
func TestStandbyIsLeaderSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := racedecidertest.NewMonitor(t)
		a := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: mem, LeaderID: "a", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("a")})
		m.Next(time.Hour)
		reg := prometheus.NewPedanticRegistry()
		obs, err := leprom.New(reg, leprom.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: mem, LeaderID: "b", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("b"), Observer: obs})
		time.Sleep(2 * term)
		synctest.Wait()
		if v, found := scrape(t, reg, "is_leader"); !found || v != 0 {
			t.Errorf("standby b: is_leader = %v (found %v), want a series at 0", v, found)
		}
		b.Stop(t)
		a.Stop(t)
	})
}

// TestNewFailsCleanly: New checks its buckets, which client_golang would
// check only on the first request observed, by panicking on the engine's
// goroutine; and a New that fails leaves nothing registered, so that it can
// be called again once the clash is gone.
func TestNewFailsCleanly(t *testing.T) {
	for _, b := range [][]float64{{1, 0.5}, {1, 1}} {
		if _, err := leprom.New(prometheus.NewRegistry(), leprom.Options{Buckets: b}); err == nil || !strings.Contains(err.Error(), "Options.Buckets") {
			t.Errorf("Buckets %v: %v, want an error naming Options.Buckets", b, err)
		}
	}
	// "le" too: client_golang refuses it in a histogram's labels only
	// when it makes the histogram.
	if _, err := leprom.New(prometheus.NewRegistry(), leprom.Options{ConstLabels: prometheus.Labels{"le": "x"}}); err == nil || !strings.Contains(err.Error(), `"le"`) {
		t.Errorf(`ConstLabels {le: x}: %v, want an error naming "le"`, err)
	}
	reg := prometheus.NewRegistry()
	// The same metric as New's last, registered first.
	clash := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leaderelection_clock_warnings_total",
		Help: "Times the clock offset bound went past MaxClockSkew/4."}, []string{"election"})
	reg.MustRegister(clash)
	if _, err := leprom.New(reg, leprom.Options{}); err == nil {
		t.Fatal("New succeeded over a metric of the same name")
	}
	reg.Unregister(clash)
	if _, err := leprom.New(reg, leprom.Options{}); err != nil {
		t.Errorf("New after the clash was removed: %v", err)
	}
}

// TestStaleTenureEventsIgnored: in a process that runs a candidate and a
// watcher on one Observer, the watcher may report the previous tenure's
// extension and expiry after the candidate reported the next tenure. Those
// do not take fencing_token back, nor name the old leader, nor leave no
// leader; the end of the newest tenure does.
func TestStaleTenureEventsIgnored(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs, err := leprom.New(reg, leprom.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const el = "mem://x"
	t0 := time.Unix(1_800_000_000, 0)
	obs.Observe(leaderelection.Event{Kind: leaderelection.EventStarted, Election: el, LeaderID: "c"})
	obs.Observe(leaderelection.Event{Kind: leaderelection.EventLeaderChanged, Election: el, LeaderID: "b", Term: 2, Expiry: t0.Add(time.Minute)})
	for _, c := range []leaderelection.ChangeKind{leaderelection.TermExtended, leaderelection.TermExpired} {
		obs.Observe(leaderelection.Event{Kind: leaderelection.EventWatchChange, Election: el, Change: c, LeaderID: "a", Term: 1, Expiry: t0})
		want(t, reg, c.String()+" of term 1", "fencing_token", eq(2), "term 2's")
		want(t, reg, c.String()+" of term 1", "term_expiry_timestamp_seconds", eq(float64(t0.Add(time.Minute).Unix())), "term 2's")
		if ids := leaders(t, reg); len(ids) != 1 || ids[0] != "b" {
			t.Errorf("after term 1 %v: leader_info for %v, want b", c, ids)
		}
	}
	obs.Observe(leaderelection.Event{Kind: leaderelection.EventWatchChange, Election: el, Change: leaderelection.LeaderReleased, LeaderID: "b", Term: 2, Expiry: t0})
	if ids := leaders(t, reg); len(ids) != 0 {
		t.Errorf("after term 2 was released: leader_info for %v, want none", ids)
	}
	// The end of a tenure never seen begun is the newest tenure seen;
	// the candidate's late report of the one before it is stale.
	obs.Observe(leaderelection.Event{Kind: leaderelection.EventWatchChange, Election: el, Change: leaderelection.LeaderReleased, LeaderID: "d", Term: 4, Expiry: t0})
	obs.Observe(leaderelection.Event{Kind: leaderelection.EventLeaderChanged, Election: el, LeaderID: "c", Term: 3, Expiry: t0.Add(time.Minute)})
	want(t, reg, "term 4 released, then term 3 reported", "fencing_token", eq(4), "term 4's")
	if ids := leaders(t, reg); len(ids) != 0 {
		t.Errorf("term 4 released, then term 3 reported: leader_info for %v, want none", ids)
	}
	// Once the election is no longer followed, the next tenure seen is
	// taken, whatever its Term (a record made anew).
	obs.Observe(leaderelection.Event{Kind: leaderelection.EventStopped, Election: el, LeaderID: "c"})
	obs.Observe(leaderelection.Event{Kind: leaderelection.EventStarted, Election: el, LeaderID: "c"})
	obs.Observe(leaderelection.Event{Kind: leaderelection.EventLeaderChanged, Election: el, LeaderID: "e", Term: 1, Expiry: t0})
	want(t, reg, "followed anew, term 1 reported", "fencing_token", eq(1), "term 1's")
	if ids := leaders(t, reg); len(ids) != 1 || ids[0] != "e" {
		t.Errorf("followed anew, term 1 reported: leader_info for %v, want e", ids)
	}
}

// TestIsLeaderAcrossAcquires: is_leader is 1 while any tenure of this
// process runs, when two Acquires of it campaign on one election: the
// other's start and return do not take it to 0.
func TestIsLeaderAcrossAcquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := racedecidertest.NewMonitor(t)
		reg := prometheus.NewPedanticRegistry()
		obs, err := leprom.New(reg, leprom.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := func(id string) leaderelection.Config {
			return leaderelection.Config{Decider: mem, LeaderID: id, TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected(id), Observer: obs}
		}
		a := racedecidertest.StartCandidate(t.Context(), cfg("a"))
		m.Next(time.Hour)
		b := racedecidertest.StartCandidate(t.Context(), cfg("b"))
		time.Sleep(term)
		synctest.Wait()
		want(t, reg, "a leading, b waiting", "is_leader", eq(1), "1")
		b.Stop(t)
		synctest.Wait()
		want(t, reg, "a leading, b returned", "is_leader", eq(1), "1")
		a.Stop(t)
		synctest.Wait()
		want(t, reg, "both returned", "is_leader", eq(0), "0")
	})
}

// TestTenureGaugesGoneWhenNotFollowed: once the last Acquire or Watch of
// the process on an election returns, what it saw there (fencing token,
// expiry, clock offset) is no longer exported; is_leader stays, at 0.
func TestTenureGaugesGoneWhenNotFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := racedecidertest.NewMonitor(t)
		reg := prometheus.NewPedanticRegistry()
		obs, err := leprom.New(reg, leprom.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: memory.NewDecider(), LeaderID: "a", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("a"), Observer: obs})
		m.Next(time.Hour)
		time.Sleep(term)
		synctest.Wait()
		gauges := []string{"fencing_token", "term_expiry_timestamp_seconds", "clock_offset_seconds"}
		for _, g := range gauges {
			if _, found := scrape(t, reg, g); !found {
				t.Errorf("while a leads: no %s series", g)
			}
		}
		a.Stop(t)
		synctest.Wait()
		for _, g := range gauges {
			if v, found := scrape(t, reg, g); found {
				t.Errorf("after the Acquire returned: %s = %v, want no series", g, v)
			}
		}
		want(t, reg, "after the Acquire returned", "is_leader", eq(0), "a series at 0")
	})
}

// namedDecider is a Decider whose name is not UTF-8, as a file path's may
// be.
type namedDecider struct{ leaderelection.RaceDecider }

func (namedDecider) String() string { return "file:///srv/\xff/election" }

// TestElectionNotUTF8: a store whose name is not UTF-8 is exported (as
// the engine spells it), where Prometheus, whose labels must be UTF-8,
// panicked on Acquire's goroutine.
func TestElectionNotUTF8(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := racedecidertest.NewMonitor(t)
		reg := prometheus.NewPedanticRegistry()
		obs, err := leprom.New(reg, leprom.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
			Decider: namedDecider{memory.NewDecider()}, LeaderID: "a", TermLength: term, MaxClockSkew: skew, OnElected: m.OnElected("a"), Observer: obs})
		m.Next(time.Hour)
		want(t, reg, "a leading", "is_leader", eq(1), "1", "election", `file:///srv/\xff/election`)
		a.Stop(t)
	})
}
