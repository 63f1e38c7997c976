package leprom_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/leprom"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

const (
	term = 10 * time.Second
	skew = time.Second
)

// scrape gathers reg and returns the value of the series of metric name
// (leaderelection_ prefix omitted) whose labels include every pair in
// labels: a counter's or gauge's value, a histogram's sample count; summed
// when several match. found says whether any did.
func scrape(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (v float64, found bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "leaderelection_"+name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if label(m, labels[i]) != labels[i+1] {
					continue series
				}
			}
			found = true
			switch {
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Histogram != nil:
				v += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return v, found
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// leaders returns the leader_id of every leader_info series.
func leaders(t *testing.T, reg prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, mf := range mfs {
		if mf.GetName() == "leaderelection_leader_info" {
			for _, m := range mf.GetMetric() {
				ids = append(ids, label(m, "leader_id"))
			}
		}
	}
	return ids
}

// want checks one scraped value.
func want(t *testing.T, reg prometheus.Gatherer, who, name string, check func(float64) bool, desc string, labels ...string) {
	t.Helper()
	v, ok := scrape(t, reg, name, labels...)
	if !ok || !check(v) {
		t.Errorf("%s: %s%v = %v (found %v), want %s", who, name, labels, v, ok, desc)
	}
}

func eq(x float64) func(float64) bool { return func(v float64) bool { return v == x } }
func atLeast(x float64) func(float64) bool {
	return func(v float64) bool { return v >= x }
}

// refusing refuses every write, as a store without write permission does.
type refusing struct{ leaderelection.RaceDecider }

func (refusing) WriteEntry(context.Context, *entry.RaceEntry) (entry.LeaderToken, error) {
	return entry.LeaderToken{}, fmt.Errorf("test store: 403 access denied: %w", entry.ErrRefused)
}

// TestElectionMetrics runs three candidates and a watcher, each process
// with its own registry, through a hand-over, a crash failover and a
// refused store, scraping the registries as it goes.
func TestElectionMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Off the whole second the bubble starts on, so that commit times
		// have a sub-second part as real clocks' do (whole seconds are
		// taken for a store's 1 s precision).
		time.Sleep(123456789 * time.Nanosecond)
		mem := memory.NewDecider()
		m := racedecidertest.NewMonitor(t)
		regs := map[string]*prometheus.Registry{}
		newObserver := func(who string) *leprom.Observer {
			regs[who] = prometheus.NewPedanticRegistry()
			o, err := leprom.New(regs[who], leprom.Options{ConstLabels: prometheus.Labels{"process": who}})
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		access := map[string]racedecidertest.Access{}
		cands := map[string]*racedecidertest.Candidate{}
		start := func(id string) {
			access[id] = racedecidertest.Cuttable(mem)
			cands[id] = racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
				Decider: access[id].Decider, LeaderID: id, TermLength: term, MaxClockSkew: skew,
				OnElected: m.OnElected(id), Observer: newObserver(id),
			})
		}
		wctx, stopWatch := context.WithCancel(t.Context())
		watchDone := make(chan error, 1)
		watcher := leaderelection.WatchConfig{Decider: mem, MaxClockSkew: skew, Observer: newObserver("watcher")}
		go func() { watchDone <- watcher.Watch(wctx, func(context.Context, leaderelection.Change) {}) }()

		start("a")
		first := m.Next(time.Hour)
		time.Sleep(term)
		synctest.Wait()
		a := regs["a"]
		want(t, a, "a", "is_leader", eq(1), "1")
		want(t, a, "a", "fencing_token", eq(float64(first.Term)), fmt.Sprint(first.Term))
		want(t, a, "a", "term_expiry_timestamp_seconds", atLeast(float64(time.Now().Unix())), "in the future")
		want(t, a, "a", "transitions_total", eq(1), "1", "reason", "elected")
		want(t, a, "a", "store_requests_total", atLeast(3), "an acquisition and 2 extensions", "op", "write", "result", "ok")
		want(t, a, "a", "store_request_duration_seconds", atLeast(3), "a sample per write", "op", "write")
		want(t, a, "a", "clock_offset_seconds", eq(0), "0 (one clock)", "bound", "low")
		want(t, a, "a", "clock_offset_seconds", eq(0), "0 (one clock)", "bound", "high")
		if ids := leaders(t, a); len(ids) != 1 || ids[0] != "a" {
			t.Errorf("a: leader_info for %v, want a alone", ids)
		}

		start("b")
		start("c")
		time.Sleep(term)
		cands["a"].Stop(t) // hand-over
		second := m.Next(time.Hour)
		synctest.Wait()
		want(t, a, "a", "is_leader", eq(0), "0 after stepping down")
		want(t, a, "a", "transitions_total", eq(1), "1", "reason", "shutdown")
		s := regs[second.ID]
		want(t, s, second.ID, "is_leader", eq(1), "1")
		want(t, s, second.ID, "fencing_token", eq(float64(second.Term)), fmt.Sprint(second.Term))

		access[second.ID].Cut(true) // crash failover
		third := m.Next(time.Hour)
		synctest.Wait()
		want(t, s, second.ID, "is_leader", eq(0), "0 after its term expired")
		want(t, s, second.ID, "transitions_total", eq(1), "1", "reason", "expired")
		want(t, s, second.ID, "store_requests_total", atLeast(1), "some", "op", "write", "result", "unknown")
		want(t, s, second.ID, "store_requests_total", atLeast(1), "some", "op", "read", "result", "error")
		th := regs[third.ID]
		want(t, th, third.ID, "is_leader", eq(1), "1")
		want(t, th, third.ID, "fencing_token", eq(float64(third.Term)), fmt.Sprint(third.Term))
		if ids := leaders(t, th); len(ids) != 1 || ids[0] != third.ID {
			t.Errorf("%s: leader_info for %v, want %s alone", third.ID, ids, third.ID)
		}

		w := regs["watcher"]
		want(t, w, "watcher", "watch_changes_total", eq(3), "3 tenures", "kind", "elected")
		want(t, w, "watcher", "watch_changes_total", atLeast(1), "the crashed leader's expiry", "kind", "expired")
		want(t, w, "watcher", "fencing_token", eq(float64(third.Term)), fmt.Sprint(third.Term))
		if ids := leaders(t, w); len(ids) != 1 || ids[0] != third.ID {
			t.Errorf("watcher: leader_info for %v, want %s alone", ids, third.ID)
		}

		// A candidate that stops campaigning no longer shows a leader.
		start("d")
		time.Sleep(term)
		synctest.Wait()
		if ids := leaders(t, regs["d"]); len(ids) != 1 || ids[0] != third.ID {
			t.Errorf("d: leader_info for %v, want %s alone", ids, third.ID)
		}
		cands["d"].Stop(t)
		if ids := leaders(t, regs["d"]); len(ids) != 0 {
			t.Errorf("d: leader_info for %v after it stopped, want none", ids)
		}

		// A store that refuses writes ends the campaign.
		err := leaderelection.Config{
			Decider: refusing{memory.NewDecider()}, LeaderID: "r", TermLength: term, MaxClockSkew: skew,
			OnElected: m.OnElected("r"), Observer: newObserver("r"),
		}.Acquire(t.Context())
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("Acquire on a refusing store: %v", err)
		}
		want(t, regs["r"], "r", "store_requests_total", eq(1), "1", "op", "write", "result", "refused")
		want(t, regs["r"], "r", "is_leader", eq(0), "0")

		access[second.ID].Cut(false)
		for id, c := range cands {
			if id != "a" && id != "d" {
				c.Stop(t)
			}
		}
		stopWatch()
		<-watchDone
	})
}

func TestNewRefusesDuplicatesAndNil(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := leprom.New(reg, leprom.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leprom.New(reg, leprom.Options{}); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
	if _, err := leprom.New(nil, leprom.Options{}); err == nil || !strings.Contains(err.Error(), "nil Registerer") {
		t.Errorf("nil Registerer: %v", err)
	}
}
