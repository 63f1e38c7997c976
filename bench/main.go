// Command bench measures the leader-election library on real time: graceful
// handover, crash failover, steady-state request cost, observer lag, safety
// under a pause and a herd of candidates, on the memory backend behind a
// fixed per-request latency (with and without push notifications) and,
// on request, on the GCS and S3 emulators (in process) and on Azurite,
// DynamoDB Local and PostgreSQL (started beforehand by their scripts). It
// prints a table, says which targets are met, and writes the results as JSON.
//
//	go run ./bench                      # memory and memory-poll, about 2.5 minutes
//	go run ./bench -quick               # a CI-sized run
//	go run ./bench -backend all         # every backend whose server is running
//	go run ./bench -backend postgres    # after eval "$(scripts/postgres.sh start)"
//	go run ./bench -profile all         # cloud latency profiles, time-scaled
//
// Targets assume the default settings: 5 ms latency, 2 s term, 100 ms
// MaxClockSkew.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
)

// settings are the parsed flags.
type settings struct {
	term, skew, poll, watchPoll time.Duration
	latency                     time.Duration
	reps, herd, steadyTerms     int
	herdExpected                int // the herd's ExpectedCandidates (0: unset)
	parallel                    int
	quick                       bool
	legacy                      bool // -legacy: each backend also on the old schedule
	peers                       bool // -peers: a Decider for each candidate and watcher
	// writeInterval is what the gcs backend declares as the store's write
	// rate (gcs.WithMinWriteInterval): 0 on loopback, where the emulator
	// takes any rate; a profile's limit with -profile.
	writeInterval       time.Duration
	allBackends         bool // -backend all
	backends, scenarios []string
	jsonPath            string

	// The cloud profile runs (-profile): which profiles and sizing rows,
	// the time scale (0: each row's own), how many combinations run at
	// once, and about how many terms the soak holds.
	profiles, sizings []string
	scale             float64
	jobs, soakTerms   int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*settings, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := &settings{}
	var backends, scens string
	fs.DurationVar(&s.term, "term", 2*time.Second, "TermLength")
	fs.DurationVar(&s.skew, "skew", 100*time.Millisecond, "MaxClockSkew")
	fs.DurationVar(&s.poll, "poll", 0, "candidates' PollInterval (0: the library default, TermLength/4)")
	fs.DurationVar(&s.watchPoll, "watch-poll", 0, "watchers' PollInterval (0: TermLength x 1s/15s, the default 1 s scaled to the term)")
	fs.DurationVar(&s.latency, "latency", 5*time.Millisecond, "latency added to every request, half each way (on the emulators, on top of their own)")
	fs.IntVar(&s.reps, "reps", 0, "repetitions per scenario (0: 10, or 3 with -quick)")
	fs.IntVar(&s.herd, "herd", 50, "candidates in the herd scenario")
	fs.IntVar(&s.herdExpected, "herd-expected", 0, "the herd's ExpectedCandidates (0: unset, so the herd window learns the herd)")
	fs.BoolVar(&s.peers, "peers", false, "give each candidate and watcher of postgres and kube a Decider of its own, with its own listener or watch, as separate processes have (default: the candidates of an election share one, as goroutines of one process would)")
	fs.BoolVar(&s.legacy, "legacy", false, `also run each backend on the schedule from before phased polls and the learning herd window, as "BACKEND legacy", for a before/after in one run`)
	fs.IntVar(&s.steadyTerms, "steady-terms", 0, "terms measured in the steady-state scenario (0: 10, or 2 with -quick)")
	fs.IntVar(&s.parallel, "parallel", 5, "elections run at once in the failover and pause scenarios")
	fs.BoolVar(&s.quick, "quick", false, "fewer repetitions and steady-state terms")
	fs.StringVar(&backends, "backend", "memory,memory-poll", `comma-separated backends: memory, memory-poll, gcs, s3, versitygw (the s3 backend on versitygw), azblob, dynamodb, postgres, kube, or "all" (the last five need their server started: scripts/versitygw.sh, azurite.sh, dynamodb-local.sh, postgres.sh, kube-apiserver.sh; "all" skips those not running)`)
	fs.StringVar(&scens, "scenarios", "all", "comma-separated scenarios: handover, failover, steady, observer, pause, herd, or all")
	fs.StringVar(&s.jsonPath, "json", "", `where to write the JSON results ("" for nowhere, "-" for stdout; default bench/results.json, or bench/results-profiles.json with -profile)`)
	var profiles, sizings string
	fs.StringVar(&profiles, "profile", "", `run cloud latency profiles instead of the loopback scenarios: comma-separated gcs, s3, s3express, azblob, dynamodb, or "all" (s3 and s3express need versitygw started, azblob Azurite, dynamodb DynamoDB Local)`)
	fs.StringVar(&sizings, "sizing", "all", "with -profile: comma-separated sizing rows: default (15 s term, 1 s skew), quick (4 s, 500 ms), cheap (60 s, 2 s), or all")
	fs.Float64Var(&s.scale, "scale", 0, "with -profile: scale every duration and latency by this factor (0: each profile's own for each row, see bench/README.md)")
	fs.IntVar(&s.jobs, "jobs", 4, "with -profile: profile and sizing combinations run at once")
	fs.IntVar(&s.soakTerms, "soak-terms", 0, "with -profile: about how many terms lone leaders hold to count leadership lost without a crash (0: 1000, or 20 with -quick)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	jsonSet := false
	fs.Visit(func(f *flag.Flag) { jsonSet = jsonSet || f.Name == "json" })
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if profiles != "" {
		var names []string
		for _, p := range cloudProfiles {
			names = append(names, p.name)
		}
		var rows []string
		for _, r := range sizingRows {
			rows = append(rows, r.name)
		}
		var errs []error
		s.profiles, errs = parseList("profile", profiles, names, errs)
		s.sizings, errs = parseList("sizing row", sizings, rows, errs)
		if s.scale < 0 || s.scale > 1 || s.jobs < 1 || s.soakTerms < 0 {
			errs = append(errs, fmt.Errorf("-scale %g must be in [0, 1], -jobs %d at least 1, -soak-terms %d not negative", s.scale, s.jobs, s.soakTerms))
		}
		if s.reps == 0 {
			s.reps = 20
			if s.quick {
				s.reps = 2
			}
		}
		if s.steadyTerms == 0 {
			s.steadyTerms = 4
			if s.quick {
				s.steadyTerms = 1
			}
		}
		if s.soakTerms == 0 {
			s.soakTerms = 1000
			if s.quick {
				s.soakTerms = 20
			}
		}
		if !jsonSet {
			s.jsonPath = defaultJSONPath("results-profiles.json")
		}
		if s.reps < 1 || s.steadyTerms < 1 {
			errs = append(errs, errors.New("-reps and -steady-terms must be at least 1"))
		}
		return s, errors.Join(errs...)
	}
	if !jsonSet {
		s.jsonPath = defaultJSONPath("results.json")
	}
	if s.reps == 0 {
		s.reps = 10
		if s.quick {
			s.reps = 3
		}
	}
	if s.steadyTerms == 0 {
		s.steadyTerms = 10
		if s.quick {
			s.steadyTerms = 2
		}
	}
	if s.watchPoll == 0 {
		s.watchPoll = time.Duration(float64(s.term) * float64(leaderelection.DefaultWatchPollInterval) / float64(leaderelection.DefaultTermLength))
	}
	var errs []error
	if s.term <= 2*s.skew {
		errs = append(errs, fmt.Errorf("-term %v must be greater than 2 x -skew %v", s.term, s.skew))
	}
	if s.reps < 1 || s.herd < 2 || s.steadyTerms < 1 || s.herdExpected < 0 {
		errs = append(errs, errors.New("-reps and -steady-terms must be at least 1, -herd at least 2, -herd-expected not negative"))
	}
	if s.latency < 0 || s.poll < 0 || s.watchPoll <= 0 {
		errs = append(errs, errors.New("latencies and poll intervals must not be negative"))
	}
	var known []string
	for _, sc := range scenarios {
		known = append(known, sc.name)
	}
	s.allBackends = backends == "all"
	s.backends, errs = parseList("backend", backends, backendNames, errs)
	s.scenarios, errs = parseList("scenario", scens, known, errs)
	return s, errors.Join(errs...)
}

// legacySuffix names a backend's run on the legacy schedule (-legacy).
const legacySuffix = " legacy"

// run runs the benchmark: the table goes to stdout, progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if len(s.profiles) > 0 {
		return runProfiles(ctx, s, args, stdout, stderr)
	}
	start := time.Now()
	rep := &Report{
		Command: strings.TrimSpace("go run ./bench " + strings.Join(args, " ")),
		Started: start.UTC(),
		Machine: machine(),
		Settings: Settings{
			TermMs:           ms(s.term),
			MaxClockSkewMs:   ms(s.skew),
			PollIntervalMs:   ms(s.candidatePoll()),
			WatchPollMs:      ms(s.watchPoll),
			LatencyMs:        ms(s.latency),
			Reps:             s.reps,
			Herd:             s.herd,
			HerdExpected:     s.herdExpected,
			Legacy:           s.legacy,
			Peers:            s.peers,
			SteadyTerms:      s.steadyTerms,
			Parallel:         s.parallel,
			Quick:            s.quick,
			TargetsApplyNote: "targets are stated for 5 ms store latency, 2 s term, 100 ms MaxClockSkew",
		},
	}
	var runs []string
	for _, name := range s.backends {
		runs = append(runs, name)
		if s.legacy {
			runs = append(runs, name+legacySuffix)
		}
	}
	for _, run := range runs {
		name, legacy := strings.CutSuffix(run, legacySuffix)
		b, err := newBackend(ctx, name, s)
		var noServer errNoServer
		if errors.As(err, &noServer) && s.allBackends {
			// "all" runs what it can: a missing server is not a failure.
			fmt.Fprintf(stderr, "%s: skipped: %v\n", name, err)
			rep.Backends = append(rep.Backends, BackendResult{Backend: name, Skipped: err.Error()})
			continue
		}
		if err != nil {
			return err
		}
		if b.legacy = legacy; legacy {
			name = run
			b.desc += "; the schedule from before phased polls and the learning herd window"
		}
		res := BackendResult{Backend: name, Description: b.desc, Push: b.push}
		for _, sc := range scenarios {
			if !slices.Contains(s.scenarios, sc.name) {
				continue
			}
			t0 := time.Now()
			fmt.Fprintf(stderr, "%s: %s...", name, sc.name)
			rows, err := sc.run(ctx, s, b)
			if err != nil {
				res.Errors++
				rows = append(rows, Metric{Scenario: sc.name, Name: "error", Note: err.Error()})
				fmt.Fprintf(stderr, " error: %v\n", err)
			} else {
				fmt.Fprintf(stderr, " %.1f s\n", time.Since(t0).Seconds())
			}
			res.Metrics = append(res.Metrics, rows...)
			if ctx.Err() != nil {
				break
			}
		}
		res.MedianRTTMs = ms(b.rtt.median())
		b.close()
		rep.Backends = append(rep.Backends, res)
		if ctx.Err() != nil {
			break
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	printTable(stdout, rep)
	if err := writeJSON(rep, s.jsonPath, stdout); err != nil {
		return err
	}
	return ctx.Err()
}

// machine describes the host.
func machine() Machine {
	return Machine{
		CPUModel: cpuModel(), NumCPU: runtime.NumCPU(), GOMAXPROC: runtime.GOMAXPROCS(0),
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(),
	}
}

// defaultJSONPath is bench/name when run from the repository root, else
// bench-name in the current directory.
func defaultJSONPath(name string) string {
	if fi, err := os.Stat("bench"); err == nil && fi.IsDir() {
		return filepath.Join("bench", name)
	}
	return "bench-" + name
}

func writeJSON(rep *Report, path string, stdout io.Writer) error {
	return writeJSONAny(rep, path, stdout)
}

func writeJSONAny(rep any, path string, stdout io.Writer) error {
	if path == "" {
		return nil
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "-" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	fmt.Fprintf(stdout, "JSON written to %s\n", path)
	return nil
}

// parseList parses a comma-separated flag value naming some of known, or
// "all", appending an error for each unknown name.
func parseList(what, value string, known []string, errs []error) ([]string, []error) {
	if value == "all" {
		return known, errs
	}
	var out []string
	for name := range strings.SplitSeq(value, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(known, name) {
			errs = append(errs, fmt.Errorf("unknown %s %q (known: %s, all)", what, name, strings.Join(known, ", ")))
		}
		out = append(out, name)
	}
	return out, errs
}
