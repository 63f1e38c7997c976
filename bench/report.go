package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the JSON the program writes.
type Report struct {
	Command  string          `json:"command"`
	Started  time.Time       `json:"started"`
	Seconds  float64         `json:"seconds"`
	Machine  Machine         `json:"machine"`
	Settings Settings        `json:"settings"`
	Backends []BackendResult `json:"backends"`
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPUModel  string `json:"cpuModel"`
	NumCPU    int    `json:"numCPU"`
	GOMAXPROC int    `json:"gomaxprocs"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"goVersion"`
}

// Settings are the election and run settings, durations in milliseconds.
type Settings struct {
	TermMs           float64 `json:"termMs"`
	MaxClockSkewMs   float64 `json:"maxClockSkewMs"`
	PollIntervalMs   float64 `json:"pollIntervalMs"`
	WatchPollMs      float64 `json:"watchPollIntervalMs"`
	LatencyMs        float64 `json:"addedLatencyMs"`
	Reps             int     `json:"reps"`
	Herd             int     `json:"herd"`
	HerdExpected     int     `json:"herdExpectedCandidates"` // 0: unset
	Legacy           bool    `json:"legacy,omitempty"`
	Peers            bool    `json:"peers,omitempty"`
	SteadyTerms      int     `json:"steadyTerms"`
	Parallel         int     `json:"parallel"`
	Quick            bool    `json:"quick"`
	TargetsApplyNote string  `json:"targetsNote"`
}

// BackendResult holds every metric measured on one backend.
type BackendResult struct {
	Backend     string   `json:"backend"`
	Description string   `json:"description"`
	Push        bool     `json:"push"`
	MedianRTTMs float64  `json:"medianRequestMs"`
	Metrics     []Metric `json:"metrics"`
	Errors      int      `json:"errors"`
	// Skipped says why the backend did not run (its server was not started).
	Skipped string `json:"skipped,omitempty"`
}

// Stat summarises the samples of one metric, and keeps them (in the order
// measured) for the JSON results, where a comparison of two runs can weigh
// more than their medians and maxima.
type Stat struct {
	N       int       `json:"n"`
	Median  float64   `json:"median"`
	Max     float64   `json:"max"`
	Min     float64   `json:"min"`
	Samples []float64 `json:"samples,omitempty"`
}

// Metric is one row of the table.
type Metric struct {
	Scenario string `json:"scenario"`
	Name     string `json:"metric"`
	Unit     string `json:"unit"`
	Stat
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	Note   string `json:"note,omitempty"`
}

func statOf(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := slices.Sorted(slices.Values(xs))
	var med float64
	if n := len(s); n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Stat{N: len(s), Median: med, Max: s[len(s)-1], Min: s[0], Samples: slices.Clone(xs)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func msStat(ds []time.Duration) Stat {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = ms(d)
	}
	return statOf(xs)
}

// metric returns a row without a target.
func metric(scenario, name, unit string, st Stat) Metric {
	return Metric{Scenario: scenario, Name: name, Unit: unit, Stat: st}
}

// withTarget sets the row's target and whether it is met.
func (m Metric) withTarget(desc string, met bool) Metric {
	m.Target = desc
	m.Met = &met
	return m
}

func (m Metric) withNote(note string) Metric {
	m.Note = note
	return m
}

func fmtVal(v float64, unit string) string {
	if v < 0 && v > -0.05 {
		v = 0 // a watcher told a few microseconds before OnElected ran
	}
	switch {
	case math.IsNaN(v):
		return "-"
	case unit == "req/h":
		return fmt.Sprintf("%.0f", v)
	case unit == "ms" && math.Abs(v) < 100:
		return fmt.Sprintf("%.1f", v)
	case unit == "ms":
		return fmt.Sprintf("%.0f", v)
	case v == math.Trunc(v) && math.Abs(v) < 1e7:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func (m Metric) metLabel() string {
	switch {
	case m.Met == nil:
		return ""
	case *m.Met:
		return "met"
	default:
		return "NOT MET"
	}
}

// printTable writes the human-readable report.
func printTable(w io.Writer, r *Report) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintf(bw, "Machine: %s, %d CPUs (GOMAXPROCS %d), %s/%s, %s\n",
		r.Machine.CPUModel, r.Machine.NumCPU, r.Machine.GOMAXPROC, r.Machine.GOOS, r.Machine.GOARCH, r.Machine.GoVersion)
	st := r.Settings
	fmt.Fprintf(bw, "Election: TermLength %v, MaxClockSkew %v, candidate PollInterval %v, watcher PollInterval %v; %d repetitions, herd of %d, %d steady-state terms\n",
		msDur(st.TermMs), msDur(st.MaxClockSkewMs), msDur(st.PollIntervalMs), msDur(st.WatchPollMs), st.Reps, st.Herd, st.SteadyTerms)
	fmt.Fprintf(bw, "Command: %s\n", r.Command)
	for _, b := range r.Backends {
		if b.Skipped != "" {
			fmt.Fprintf(bw, "\n== %s: skipped: %s\n", b.Backend, b.Skipped)
			continue
		}
		fmt.Fprintf(bw, "\n== %s: %s; median request %.1f ms\n", b.Backend, b.Description, b.MedianRTTMs)
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\tmetric\tunit\tmedian\tmax\tn\ttarget\t")
		for _, m := range b.Metrics {
			if m.Name == "error" {
				fmt.Fprintf(tw, "%s\tERROR\t\t\t\t\t%s\t\n", m.Scenario, m.Note)
				continue
			}
			target := m.Target
			if l := m.metLabel(); l != "" {
				target += ": " + l
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", m.Scenario, m.Name, m.Unit,
				fmtVal(m.Median, m.Unit), fmtVal(m.Max, m.Unit), m.N, target)
		}
		tw.Flush()
	}
	met, notMet := 0, 0
	var missed []string
	for _, b := range r.Backends {
		for _, m := range b.Metrics {
			if m.Met == nil {
				continue
			}
			if *m.Met {
				met++
			} else {
				notMet++
				missed = append(missed, b.Backend+": "+m.Scenario+" / "+m.Name)
			}
		}
	}
	fmt.Fprintf(bw, "\nTargets met: %d of %d\n", met, met+notMet)
	for _, s := range missed {
		fmt.Fprintf(bw, "  not met: %s\n", s)
	}
	fmt.Fprintf(bw, "Run took %.0f s.\n", r.Seconds)
}

func msDur(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// machine describes the host.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
