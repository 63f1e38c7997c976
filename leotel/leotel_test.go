package leotel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/leotel"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

const (
	term = 10 * time.Second
	skew = time.Second
)

// process is one process's metrics pipeline: an in-memory reader.
type process struct {
	name   string
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	obs    *leotel.Observer
}

func newProcess(t *testing.T, name string) *process {
	t.Helper()
	p := &process{name: name, reader: sdkmetric.NewManualReader()}
	p.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	obs, err := leotel.New(p.mp)
	if err != nil {
		t.Fatal(err)
	}
	p.obs = obs
	t.Cleanup(func() { _ = p.mp.Shutdown(context.Background()) })
	return p
}

// value collects and returns the value of metric name summed over the data
// points whose attributes include every pair in attrs (a histogram's count).
func (p *process) value(t *testing.T, name string, attrs ...string) (v float64, found bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := p.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	match := func(set attribute.Set) bool {
		for i := 0; i+1 < len(attrs); i += 2 {
			if val, ok := set.Value(attribute.Key(attrs[i])); !ok || val.AsString() != attrs[i+1] {
				return false
			}
		}
		found = true
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != leotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, leotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					if match(dp.Attributes) {
						v += float64(dp.Value)
					}
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					if match(dp.Attributes) {
						v += float64(dp.Value)
					}
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					if match(dp.Attributes) {
						v += dp.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					if match(dp.Attributes) {
						v += float64(dp.Count)
					}
				}
			default:
				t.Fatalf("%s: unexpected data type %T", name, m.Data)
			}
		}
	}
	return v, found
}

func (p *process) want(t *testing.T, name string, check func(float64) bool, desc string, attrs ...string) {
	t.Helper()
	v, ok := p.value(t, name, attrs...)
	if !ok || !check(v) {
		t.Errorf("%s: %s%v = %v (found %v), want %s", p.name, name, attrs, v, ok, desc)
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

// TestElectionMetrics runs three candidates and a watcher, each with its
// own MeterProvider and reader, through a hand-over, a crash failover and a
// refused store.
func TestElectionMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Off the whole second the bubble starts on, so that commit times
		// have a sub-second part as real clocks' do.
		time.Sleep(123456789 * time.Nanosecond)
		mem := memory.NewDecider()
		m := racedecidertest.NewMonitor(t)
		procs := map[string]*process{}
		access := map[string]racedecidertest.Access{}
		cands := map[string]*racedecidertest.Candidate{}
		start := func(id string) {
			procs[id] = newProcess(t, id)
			access[id] = racedecidertest.Cuttable(mem)
			cands[id] = racedecidertest.StartCandidate(t.Context(), leaderelection.Config{
				Decider: access[id].Decider, LeaderID: id, TermLength: term, MaxClockSkew: skew,
				OnElected: m.OnElected(id), Observer: procs[id].obs,
			})
		}
		w := newProcess(t, "watcher")
		wctx, stopWatch := context.WithCancel(t.Context())
		watchDone := make(chan error, 1)
		go func() {
			wc := leaderelection.WatchConfig{Decider: mem, MaxClockSkew: skew, Observer: w.obs}
			watchDone <- wc.Watch(wctx, func(context.Context, leaderelection.Change) {})
		}()

		start("a")
		first := m.Next(time.Hour)
		time.Sleep(term)
		synctest.Wait()
		a := procs["a"]
		a.want(t, "leaderelection.is_leader", eq(1), "1")
		a.want(t, "leaderelection.fencing_token", eq(float64(first.Term)), fmt.Sprint(first.Term))
		a.want(t, "leaderelection.term.expiry", atLeast(float64(time.Now().Unix())), "in the future")
		a.want(t, "leaderelection.leader", eq(1), "1", "leader_id", "a")
		a.want(t, "leaderelection.transitions", eq(1), "1", "reason", "elected")
		a.want(t, "leaderelection.store.requests", atLeast(3), "an acquisition and 2 extensions", "op", "write", "result", "ok")
		a.want(t, "leaderelection.store.request.duration", atLeast(3), "a sample per write", "op", "write")
		a.want(t, "leaderelection.clock.offset", eq(0), "0 (one clock)", "bound", "low")
		a.want(t, "leaderelection.clock.offset", eq(0), "0 (one clock)", "bound", "high")

		start("b")
		start("c")
		time.Sleep(term)
		cands["a"].Stop(t) // hand-over
		second := m.Next(time.Hour)
		synctest.Wait()
		a.want(t, "leaderelection.is_leader", eq(0), "0 after stepping down")
		a.want(t, "leaderelection.transitions", eq(1), "1", "reason", "shutdown")
		s := procs[second.ID]
		s.want(t, "leaderelection.is_leader", eq(1), "1")

		access[second.ID].Cut(true) // crash failover
		third := m.Next(time.Hour)
		synctest.Wait()
		s.want(t, "leaderelection.is_leader", eq(0), "0 after its term expired")
		s.want(t, "leaderelection.transitions", eq(1), "1", "reason", "expired")
		s.want(t, "leaderelection.store.requests", atLeast(1), "some", "op", "write", "result", "unknown")
		th := procs[third.ID]
		th.want(t, "leaderelection.is_leader", eq(1), "1")
		th.want(t, "leaderelection.fencing_token", eq(float64(third.Term)), fmt.Sprint(third.Term))
		th.want(t, "leaderelection.leader", eq(1), "one current leader")
		th.want(t, "leaderelection.leader", eq(1), "1", "leader_id", third.ID)

		w.want(t, "leaderelection.watch.changes", eq(3), "3 tenures", "kind", "elected")
		w.want(t, "leaderelection.watch.changes", atLeast(1), "the crashed leader's expiry", "kind", "expired")
		w.want(t, "leaderelection.leader", eq(1), "one current leader")
		w.want(t, "leaderelection.leader", eq(1), "1", "leader_id", third.ID)

		// A candidate that stops campaigning no longer shows a leader.
		start("d")
		time.Sleep(term)
		synctest.Wait()
		procs["d"].want(t, "leaderelection.leader", eq(1), "1", "leader_id", third.ID)
		cands["d"].Stop(t)
		if v, ok := procs["d"].value(t, "leaderelection.leader"); ok {
			t.Errorf("d: leaderelection.leader = %v after it stopped, want no series", v)
		}

		r := newProcess(t, "r")
		err := leaderelection.Config{
			Decider: refusing{memory.NewDecider()}, LeaderID: "r", TermLength: term, MaxClockSkew: skew,
			OnElected: m.OnElected("r"), Observer: r.obs,
		}.Acquire(t.Context())
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("Acquire on a refusing store: %v", err)
		}
		r.want(t, "leaderelection.store.requests", eq(1), "1", "op", "write", "result", "refused")
		r.want(t, "leaderelection.is_leader", eq(0), "0")

		access[second.ID].Cut(false)
		for id, c := range cands {
			if id != "a" && id != "d" {
				c.Stop(t)
			}
		}
		stopWatch()
		<-watchDone
		for _, p := range procs {
			if err := p.obs.Close(); err != nil {
				t.Error(err)
			}
		}
	})
}
