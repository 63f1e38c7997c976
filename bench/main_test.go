package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/internal/testenv"
)

// TestQuickRunEmitsEveryScenario runs a tiny configuration end to end on both
// memory backends and checks the JSON holds every scenario, without errors.
// Timing targets are printed by the program, never asserted here.
func TestQuickRunEmitsEveryScenario(t *testing.T) {
	quickRun(t, "memory,memory-poll", "memory", "memory-poll")
}

// With -legacy each backend runs twice, the second time on the old schedule.
func TestQuickRunLegacy(t *testing.T) {
	rep := quickRun(t, "memory-poll -legacy", "memory-poll", "memory-poll legacy")
	if !rep.Settings.Legacy || strings.Contains(rep.Backends[0].Description, "learning herd") || !strings.Contains(rep.Backends[1].Description, "learning herd") {
		t.Errorf("legacy %v, descriptions %q and %q: want only the second run's to name the old schedule",
			rep.Settings.Legacy, rep.Backends[0].Description, rep.Backends[1].Description)
	}
}

// TestQuickRunOnServers does the same on each server backend whose server
// is running.
func TestQuickRunOnServers(t *testing.T) {
	for _, name := range []string{"azblob", "dynamodb", "postgres", "kube"} {
		t.Run(name, func(t *testing.T) {
			srv := servers[name]
			testenv.Server(t, srv.env, srv.name, srv.start)
			rep := quickRun(t, name, name)
			if got := rep.Backends[0].Push; got != (name == "postgres" || name == "kube") {
				t.Errorf("%s: push = %v", name, got)
			}
		})
	}
}

// quickRun runs every scenario on backends (followed by any further flags),
// tiny, and checks that each of want has metrics for every scenario and no
// errors.
func quickRun(t *testing.T, backends string, want ...string) *Report {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	backends, more, _ := strings.Cut(backends, " ")
	args := append(strings.Fields(more),
		"-backend", backends,
		"-quick", "-reps", "2", "-steady-terms", "1", "-herd", "8",
		"-term", "400ms", "-skew", "20ms", "-latency", "1ms", "-json", path,
	)
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	if rep.Settings.TermMs != 400 || rep.Settings.Reps != 2 || !rep.Settings.Quick {
		t.Errorf("settings %+v do not match the flags", rep.Settings)
	}
	var got []string
	for _, b := range rep.Backends {
		got = append(got, b.Backend)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("backends %v, want %v", got, want)
	}
	out := stdout.String()
	for _, b := range rep.Backends {
		if b.Errors != 0 {
			t.Errorf("%s: %d scenario errors", b.Backend, b.Errors)
		}
		seen := map[string]int{}
		for _, m := range b.Metrics {
			if m.Name == "error" {
				t.Errorf("%s: %s failed: %s", b.Backend, m.Scenario, m.Note)
				continue
			}
			if m.N == 0 {
				t.Errorf("%s: %s / %s has no samples", b.Backend, m.Scenario, m.Name)
			}
			seen[m.Scenario]++
		}
		for _, sc := range scenarios {
			if seen[sc.name] == 0 {
				t.Errorf("%s: no metrics for scenario %s", b.Backend, sc.name)
			}
		}
		if b.MedianRTTMs < 1 {
			t.Errorf("%s: median request %.2f ms, want at least the 1 ms latency added", b.Backend, b.MedianRTTMs)
		}
		if !strings.Contains(out, "== "+b.Backend+":") {
			t.Errorf("table output lacks backend %s:\n%s", b.Backend, out)
		}
	}
	for _, want := range []string{"Targets met:", "JSON written to"} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q:\n%s", want, out)
		}
	}
	return &rep
}

// TestMissingServer checks that a server backend whose variable is unset is
// an error naming the variable and the start command when asked for by
// name, and is reported as skipped when "all" is asked.
func TestMissingServer(t *testing.T) {
	for _, srv := range servers {
		t.Setenv(srv.env, "")
	}
	for name, srv := range servers {
		err := run(t.Context(), []string{"-backend", name, "-json", ""}, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), srv.env) || !strings.Contains(err.Error(), srv.start) {
			t.Errorf("-backend %s without a server: %v, want an error naming %s and %s", name, err, srv.env, srv.start)
		}
	}

	path := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-backend", "all", "-scenarios", "handover", "-reps", "1",
		"-term", "400ms", "-skew", "20ms", "-latency", "1ms", "-json", path}
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("-backend all without servers: %v\nstderr:\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	if len(rep.Backends) != len(backendNames) {
		t.Fatalf("%d backends reported, want %d", len(rep.Backends), len(backendNames))
	}
	for _, b := range rep.Backends {
		srv, isServer := servers[b.Backend]
		switch {
		case isServer && !strings.Contains(b.Skipped, srv.start):
			t.Errorf("%s: skipped %q, want the start command %s", b.Backend, b.Skipped, srv.start)
		case isServer && !strings.Contains(stdout.String(), "== "+b.Backend+": skipped"):
			t.Errorf("table does not say %s was skipped:\n%s", b.Backend, stdout.String())
		case !isServer && (b.Skipped != "" || b.Errors != 0 || len(b.Metrics) == 0):
			t.Errorf("%s: skipped %q, %d errors, %d metrics; want it run", b.Backend, b.Skipped, b.Errors, len(b.Metrics))
		}
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-backend", "nope"},
		{"-scenarios", "nope"},
		{"-term", "100ms", "-skew", "50ms"},
		{"-herd-expected", "-1"},
		{"stray"},
	} {
		var buf bytes.Buffer
		if _, err := parseFlags(args, &buf); err == nil {
			t.Errorf("parseFlags(%q) accepted it", args)
		}
	}
	s, err := parseFlags([]string{"-backend", "all", "-quick"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.backends) != len(backendNames) || s.reps != 3 || s.steadyTerms != 2 {
		t.Errorf("-backend all -quick gave %+v", s)
	}
	if want := 2 * time.Second / 15; s.watchPoll != want {
		t.Errorf("default watcher poll %v, want %v (1 s : 15 s scaled to the 2 s term)", s.watchPoll, want)
	}
}

func TestBusiestWindow(t *testing.T) {
	el := newElection(nil, false, 0, &rttLog{})
	t0 := time.Now()
	for _, off := range []time.Duration{0, 10, 20, 150, 160, 170, 180, 240, 400} {
		el.ops = append(el.ops, opEvent{at: t0.Add(off * time.Millisecond), kind: opRead})
	}
	el.ops = append(el.ops, opEvent{at: t0.Add(175 * time.Millisecond), kind: opWrite})
	if got := el.busiest(t0, t0.Add(time.Second), 100*time.Millisecond); got != 6 {
		t.Errorf("busiest 100 ms = %d, want 6 (150..240 ms)", got)
	}
	if r, w := el.opsBetween(t0.Add(150*time.Millisecond), t0.Add(180*time.Millisecond)); r != 4 || w != 1 {
		t.Errorf("opsBetween = %d reads, %d writes, want 4 and 1", r, w)
	}
}

func TestStat(t *testing.T) {
	if s := statOf([]float64{5, 1, 3, 2}); s.Median != 2.5 || s.Max != 5 || s.Min != 1 || s.N != 4 || !slices.Equal(s.Samples, []float64{5, 1, 3, 2}) {
		t.Errorf("statOf = %+v", s)
	}
	if s := statOf(nil); s.N != 0 {
		t.Errorf("statOf(nil) = %+v", s)
	}
}
