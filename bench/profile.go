package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/faultproxy"
)

// cloudProfile is how one cloud store answers, at real speed, and the
// backend (with its emulator) that plays it. bench/README.md gives the
// sources of the figures.
type cloudProfile struct {
	name    string
	backend string
	store   faultproxy.Store
	profile faultproxy.Profile
	// basis says in a few words where the figures come from.
	basis string
	// scales, if set, replaces the sizing rows' time scale: a store whose
	// emulator runs in a separate process answers in milliseconds of its
	// own, which a finer scale would magnify.
	scales map[string]float64
	// writesPerSecond bounds the soak's writes (scaled time) so that the
	// emulator keeps up on this 2-core machine.
	writesPerSecond float64
}

// serverScales slow time less for the stores whose emulators are separate
// processes (versitygw, Azurite, DynamoDB Local), whose own latency would
// otherwise dwarf the profile's.
var serverScales = map[string]float64{"default": 0.25, "quick": 0.25, "cheap": 0.1}

// cloudProfiles are the stores -profile knows, in the order "all" runs
// them.
var cloudProfiles = []cloudProfile{
	{
		// The gcs backend retries failed requests itself after 100 ms,
		// 200 ms and 400 ms (not a write's 429 any more), which no time
		// scale shortens: at 1/10 those pauses would weigh ten times as
		// much against the term and the 1 s between writes as they do in
		// production. So Cloud Storage runs closer to real speed.
		scales: map[string]float64{"default": 0.5, "quick": 1, "cheap": 0.1},
		name:   "gcs", backend: "gcs", store: faultproxy.GCS,
		profile: faultproxy.Profile{
			Read:       faultproxy.Latency{Median: 60 * time.Millisecond, P99: 250 * time.Millisecond},
			Write:      faultproxy.Latency{Median: 250 * time.Millisecond, P99: 900 * time.Millisecond},
			WriteLimit: faultproxy.Limit{Rate: 1, Burst: 1},
		},
		basis: "limit: Google's quotas page (1 write/s per object, 429); latencies: estimate within third-party measurements",
	},
	{
		name: "s3", backend: "versitygw", store: faultproxy.S3,
		profile: faultproxy.Profile{
			Read:       faultproxy.Latency{Median: 30 * time.Millisecond, P99: 150 * time.Millisecond},
			Write:      faultproxy.Latency{Median: 60 * time.Millisecond, P99: 250 * time.Millisecond},
			WriteLimit: faultproxy.Limit{Rate: 3500, Burst: 3500},
		},
		basis:  "limit: AWS (3,500 writes/s per prefix, 503 SlowDown); latencies: estimate from AWS's guidance and a third-party measurement",
		scales: serverScales, writesPerSecond: 25,
	},
	{
		name: "s3express", backend: "versitygw", store: faultproxy.S3,
		profile: faultproxy.Profile{
			Read:       faultproxy.Latency{Median: 4 * time.Millisecond, P99: 15 * time.Millisecond},
			Write:      faultproxy.Latency{Median: 8 * time.Millisecond, P99: 30 * time.Millisecond},
			WriteLimit: faultproxy.Limit{Rate: 100000, Burst: 100000},
		},
		basis:  "AWS: single-digit ms first byte, 100,000 writes/s per directory bucket (503 SlowDown); tails estimated",
		scales: serverScales, writesPerSecond: 25,
	},
	{
		name: "azblob", backend: "azblob", store: faultproxy.AzureBlob,
		profile: faultproxy.Profile{
			Read:       faultproxy.Latency{Median: 20 * time.Millisecond, P99: 150 * time.Millisecond},
			Write:      faultproxy.Latency{Median: 40 * time.Millisecond, P99: 300 * time.Millisecond},
			WriteLimit: faultproxy.Limit{Rate: 500, Burst: 500},
		},
		basis:  "limit: Microsoft's scalability targets (500 requests/s per blob, 503 ServerBusy); latencies: estimate (no published figure)",
		scales: serverScales, writesPerSecond: 25,
	},
	{
		name: "dynamodb", backend: "dynamodb", store: faultproxy.DynamoDB("pk"),
		profile: faultproxy.Profile{
			Read:       faultproxy.Latency{Median: 4 * time.Millisecond, P99: 12 * time.Millisecond},
			Write:      faultproxy.Latency{Median: 6 * time.Millisecond, P99: 20 * time.Millisecond},
			WriteLimit: faultproxy.Limit{Rate: 1000, Burst: 1000},
		},
		basis:  "AWS: single-digit ms, 1,000 write units/s per partition (400 ThrottlingException); tails estimated",
		scales: serverScales, writesPerSecond: 25,
	},
}

// sizingRow is a row of the README's sizing table, and the factor its
// profile runs scale time by.
type sizingRow struct {
	name       string
	term, skew time.Duration
	scale      float64
}

// sizingRows are the README's sizing table. A 60 s term is scaled further
// than the others so that a run stays short.
var sizingRows = []sizingRow{
	{"default", 15 * time.Second, time.Second, 0.1},
	{"quick", 4 * time.Second, 500 * time.Millisecond, 0.1},
	{"cheap", 60 * time.Second, 2 * time.Second, 0.05},
}

// ProfileReport is the JSON of a -profile run. Every duration in it is at
// real speed (measured in scaled time, divided by the scale).
type ProfileReport struct {
	Command  string          `json:"command"`
	Started  time.Time       `json:"started"`
	Seconds  float64         `json:"seconds"`
	Machine  Machine         `json:"machine"`
	Reps     int             `json:"reps"`
	Steady   int             `json:"steadyTerms"`
	Jobs     int             `json:"jobs"`
	Results  []ProfileResult `json:"results"`
	Profiles []ProfileSource `json:"profiles"`
}

// ProfileSource is one profile's figures, as run.
type ProfileSource struct {
	Name      string  `json:"name"`
	Backend   string  `json:"backend"`
	ReadP50   float64 `json:"readMedianMs"`
	ReadP99   float64 `json:"readP99Ms"`
	WriteP50  float64 `json:"writeMedianMs"`
	WriteP99  float64 `json:"writeP99Ms"`
	WriteRate float64 `json:"writesPerSecondPerObject"`
	Basis     string  `json:"basis"`
}

// ProfileResult is one profile at one sizing row.
type ProfileResult struct {
	Profile     string    `json:"profile"`
	Sizing      string    `json:"sizing"`
	TermMs      float64   `json:"termMs"`
	SkewMs      float64   `json:"maxClockSkewMs"`
	PollMs      float64   `json:"pollIntervalMs"`
	WatchPollMs float64   `json:"watchPollIntervalMs"`
	Scale       float64   `json:"scale"`
	Description string    `json:"description"`
	Metrics     []PMetric `json:"metrics"`
	Errors      []string  `json:"errors,omitempty"`
}

// PMetric is one figure of a profile run, with its floor where it has one.
type PMetric struct {
	Name   string  `json:"metric"`
	Unit   string  `json:"unit"`
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
	// Floor is the least the figure can be at the profile's latencies
	// (0: none); Ratio is Median / Floor.
	Floor float64 `json:"floor,omitempty"`
	Ratio float64 `json:"ratio,omitempty"`
	// Expected adds to Floor what the poll schedule costs on average.
	Expected float64 `json:"expected,omitempty"`
	Target   string  `json:"target,omitempty"`
	Met      *bool   `json:"met,omitempty"`
	Note     string  `json:"note,omitempty"`
}

// pctl returns the median and the 99th percentile (nearest rank: the
// largest sample when there are fewer than 100) of xs.
func pctl(xs []float64) (n int, med, p99 float64) {
	if len(xs) == 0 {
		return 0, math.NaN(), math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med = statOf(s).Median
	i := int(math.Ceil(0.99*float64(len(s)))) - 1
	return len(s), med, s[max(i, 0)]
}

// realMs converts scaled durations to milliseconds at real speed.
func realMs(ds []time.Duration, scale float64) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = ms(d) / scale
	}
	return out
}

func pm(name, unit string, xs []float64) PMetric {
	n, med, p99 := pctl(xs)
	m := PMetric{Name: name, Unit: unit, N: n, Median: med, P99: p99}
	if n > 0 {
		m.Max = slices.Max(xs)
	}
	return m
}

func (m PMetric) withFloor(floor, expected float64) PMetric {
	m.Floor, m.Expected = floor, expected
	if floor > 0 {
		m.Ratio = m.Median / floor
	}
	return m
}

func (m PMetric) withTarget(desc string, met bool) PMetric {
	m.Target, m.Met = desc, &met
	return m
}

func (m PMetric) withNote(n string) PMetric {
	m.Note = n
	return m
}

// profileCombo is one profile at one sizing row.
type profileCombo struct {
	cp  cloudProfile
	row sizingRow
	// legacy: the old schedule, and no write rate declared to the engine
	// (-legacy), for a before/after in one run.
	legacy bool
}

// name is the profile's name in the results.
func (c profileCombo) name() string {
	if c.legacy {
		return c.cp.name + legacySuffix
	}
	return c.cp.name
}

// runProfiles runs every profile asked for at every sizing row asked for,
// s.jobs combinations at once, prints the tables and writes the JSON.
func runProfiles(ctx context.Context, s *settings, args []string, stdout, stderr io.Writer) error {
	// Combinations run at once, and each reports its progress.
	stderr = &lockedWriter{w: stderr}
	start := time.Now()
	rep := &ProfileReport{
		Command: strings.TrimSpace("go run ./bench " + strings.Join(args, " ")),
		Started: start.UTC(),
		Machine: machine(),
		Reps:    s.reps, Steady: s.steadyTerms, Jobs: s.jobs,
	}
	var combos []profileCombo
	for _, cp := range cloudProfiles {
		if !slices.Contains(s.profiles, cp.name) {
			continue
		}
		p := cp.profile
		rep.Profiles = append(rep.Profiles, ProfileSource{
			Name: cp.name, Backend: cp.backend,
			ReadP50: ms(p.Read.Median), ReadP99: ms(p.Read.P99), WriteP50: ms(p.Write.Median), WriteP99: ms(p.Write.P99),
			WriteRate: p.WriteLimit.Rate, Basis: cp.basis,
		})
		for _, row := range sizingRows {
			if slices.Contains(s.sizings, row.name) {
				combos = append(combos, profileCombo{cp: cp, row: row})
				if s.legacy {
					combos = append(combos, profileCombo{cp: cp, row: row, legacy: true})
				}
			}
		}
	}
	// The longest runs (the longest scaled terms) first, so that the last
	// ones to finish are short.
	slices.SortStableFunc(combos, func(a, b profileCombo) int {
		return cmp.Compare(b.scaledTerm(s.scale), a.scaledTerm(s.scale))
	})
	results := make([]ProfileResult, len(combos))
	var failed error
	var mu sync.Mutex
	sem := make(chan struct{}, max(s.jobs, 1))
	var wg sync.WaitGroup
	for i, c := range combos {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			res, err := runCombo(ctx, s, c, stderr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				// The others' results are still worth printing.
				err = fmt.Errorf("%s/%s: %w", c.name(), c.row.name, err)
				failed = errors.Join(failed, err)
				res = ProfileResult{Profile: c.name(), Sizing: c.row.name, TermMs: ms(c.row.term), SkewMs: ms(c.row.skew), Errors: []string{err.Error()}}
			}
			results[i] = res
			fmt.Fprintf(stderr, "%s/%s done in %.0f s\n", c.name(), c.row.name, time.Since(t0).Seconds())
		})
	}
	wg.Wait()
	rep.Results = results
	rep.Seconds = time.Since(start).Seconds()
	printProfiles(stdout, rep)
	if err := writeJSONAny(rep, s.jsonPath, stdout); err != nil {
		return errors.Join(failed, err)
	}
	return errors.Join(failed, ctx.Err())
}

// scale is the factor the combination's run scales time by: override if
// set, else the profile's own for the row, else the row's.
func (c profileCombo) scale(override float64) float64 {
	if override > 0 {
		return override
	}
	if x, ok := c.cp.scales[c.row.name]; ok {
		return x
	}
	return c.row.scale
}

func (c profileCombo) scaledTerm(override float64) time.Duration {
	return time.Duration(float64(c.row.term) * c.scale(override))
}

// runCombo runs the scenarios of one profile at one sizing row, in time
// scaled by the row's factor, on a backend of its own.
func runCombo(ctx context.Context, base *settings, c profileCombo, stderr io.Writer) (ProfileResult, error) {
	f := c.scale(base.scale)
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f) }
	s := *base
	s.term, s.skew, s.poll = sc(c.row.term), sc(c.row.skew), 0
	s.watchPoll = sc(leaderelection.DefaultWatchPollInterval)
	s.latency = 0
	s.parallel = 5
	prof := c.cp.profile.Scaled(f)
	if lim := prof.WriteLimit; lim.Rate > 0 && lim.Burst <= 1 && !c.legacy {
		// The store's rate, declared to the engine as its Decider would
		// declare the real one's (gcs.DefaultMinWriteInterval).
		s.writeInterval = time.Duration(float64(time.Second) / lim.Rate)
	}
	var seed uint64 = 1
	shape := func(next http.RoundTripper) *faultproxy.Shaper {
		seed++
		return faultproxy.NewShaper(next, c.cp.store, prof, seed)
	}
	b, err := newShapedBackend(ctx, c.cp.backend, &s, shape, c.cp.name)
	if err != nil {
		return ProfileResult{}, err
	}
	defer b.close()
	b.legacy = c.legacy
	if b.shaper == nil {
		return ProfileResult{}, fmt.Errorf("backend %s has no HTTP transport to shape", c.cp.backend)
	}
	b.tally.window = sc(time.Second)
	poll := s.candidatePoll()
	res := ProfileResult{
		Profile: c.name(), Sizing: c.row.name, Scale: f,
		TermMs: ms(c.row.term), SkewMs: ms(c.row.skew),
		PollMs: ms(poll) / f, WatchPollMs: ms(s.watchPoll) / f,
		Description: b.desc,
	}
	tag := c.name() + "/" + c.row.name
	var lostIn []string      // where tenures were lost without a crash
	var throttledIn []string // where the store throttled writes
	step := func(name string, fn func() error) {
		if ctx.Err() != nil {
			return
		}
		t0 := time.Now()
		before, throttled := b.tally.snapshot().lostTotal(), b.shaper.Stats().Throttled
		err := fn()
		if n := b.tally.snapshot().lostTotal() - before; n > 0 {
			lostIn = append(lostIn, fmt.Sprintf("%d in %s", n, name))
		}
		if n := b.shaper.Stats().Throttled - throttled; n > 0 {
			throttledIn = append(throttledIn, fmt.Sprintf("%s %d", name, n))
		}
		if err != nil {
			res.Errors = append(res.Errors, name+": "+err.Error())
			fmt.Fprintf(stderr, "%s: %s: error: %v\n", tag, name, err)
			return
		}
		fmt.Fprintf(stderr, "%s: %s %.1f s\n", tag, name, time.Since(t0).Seconds())
	}
	realD := func(d time.Duration) float64 { return ms(d) / f }

	var handover []time.Duration
	step("handover", func() (err error) {
		handover, err = handoverSamples(ctx, &s, b)
		return err
	})
	var failover []failoverSample
	step("failover", func() (err error) {
		failover, err = failoverSamples(ctx, &s, b)
		return err
	})
	var observer []observerSample
	step("observer", func() (err error) {
		observer, err = observerSamples(ctx, &s, b, s.parallel)
		return err
	})
	var steady steadyResult
	steadyOK := false
	step("steady", func() (err error) {
		steady, err = steadyCounts(ctx, &s, b)
		steadyOK = err == nil
		return err
	})
	// The soak: lone leaders, enough of them for about soakTerms terms,
	// at no more than about writesPerSecond of their writes (2 a term
	// each) in scaled time, so that the emulators keep up on this 2-core
	// machine.
	rate := c.cp.writesPerSecond
	if rate == 0 {
		rate = 50
	}
	elections := max(2, min(50, int(rate*s.term.Seconds()/2)))
	terms := max(1, (s.soakTerms+elections-1)/elections)
	step("soak", func() error {
		_, err := repeat(ctx, elections, elections, func(ctx context.Context) (struct{}, error) {
			return withCluster(ctx, &s, b, func(c *cluster) (struct{}, error) {
				c.start()
				if _, err := c.rec.next(ctx, s.patience()); err != nil {
					return struct{}{}, err
				}
				return struct{}{}, sleep(ctx, time.Duration(terms)*s.term)
			})
		})
		return err
	})
	if ctx.Err() != nil {
		return res, ctx.Err()
	}

	// The store's latencies as measured through the shaper, emulator
	// included: the floors use these.
	rd := realMs(b.shaper.Latencies(faultproxy.OpRead), f)
	wr := realMs(b.shaper.Latencies(faultproxy.OpWrite), f)
	mr, mw := pm("store read", "ms", rd), pm("store conditional write", "ms", wr)
	R, W := mr.Median, mw.Median
	pollMs, watchPollMs := realD(poll), realD(s.watchPoll)
	termMs := ms(c.row.term)
	out := []PMetric{mr.withNote(fmt.Sprintf("profile %.0f / %.0f ms; slowest %.0f ms", ms(c.cp.profile.Read.Median), ms(c.cp.profile.Read.P99), mr.Max)),
		mw.withNote(fmt.Sprintf("profile %.0f / %.0f ms; slowest %.0f ms", ms(c.cp.profile.Write.Median), ms(c.cp.profile.Write.P99), mw.Max))}

	if len(handover) > 0 {
		// Release write, a read that sees it, the acquiring write; but
		// the acquiring write lands no sooner than the store's write
		// interval after the release landed (both midway through their
		// requests). On average the first of the 2 waiting candidates'
		// polls comes P/3 after the release.
		floor := W + R + W
		note := fmt.Sprintf("floor = release write + read + acquiring write; expected adds the first of 2 pollers' wait, P/3 = %.0f ms", pollMs/3)
		if lim := c.cp.profile.WriteLimit; lim.Rate > 0 && lim.Burst <= 1 && W+1000/lim.Rate > floor {
			floor = W + 1000/lim.Rate
			note = fmt.Sprintf("floor = release write + the store's %.0f ms between writes to one object (the acquiring write lands that long after the release); expected adds P/3 = %.0f ms", 1000/lim.Rate, pollMs/3)
		}
		m := pm("graceful hand-over: cancel → next leader", "ms", realMs(handover, f)).withFloor(floor, max(floor, W+R+W+pollMs/3))
		m = m.withTarget("≤ 1.5 × floor", m.Median <= 1.5*floor)
		out = append(out, m.withNote(note))
	}
	if len(failover) > 0 {
		var since, over []time.Duration
		for _, x := range failover {
			since = append(since, x.sinceCut)
			over = append(over, x.overhead)
		}
		out = append(out, pm("crash failover: cut → next leader", "ms", realMs(since, f)))
		floor := R + W
		m := pm("crash failover past TermExpiry + MaxClockSkew", "ms", realMs(over, f)).withFloor(floor, 0)
		allow := floor + termMs/50
		m = m.withTarget(fmt.Sprintf("≤ floor + 2%% of term = %.0f ms", allow), m.Median <= allow)
		out = append(out, m.withNote("floor = the read at the takeover time + the acquiring write"))
	}
	if len(observer) > 0 {
		all, told := lags(observer)
		m := pm("observer lag: new leader → watcher told", "ms", realMs(all, f)).withFloor(R, R+watchPollMs/2)
		out = append(out, m.withNote(fmt.Sprintf("floor = one read; expected adds half the watcher's poll, %.0f ms; early watcher told %d of %d", watchPollMs/2, told, len(observer))))
	}
	if steadyOK {
		per := func(n int64) float64 { return float64(n) / steady.terms }
		var fr, wrd []float64
		for _, x := range steady.followers {
			fr = append(fr, per(x.reads+x.writes))
		}
		for _, x := range steady.watchers {
			wrd = append(wrd, per(x.reads+x.writes))
		}
		lw := pm("leader writes per term", "writes", []float64{per(steady.leader.writes)}).withFloor(2, 0)
		out = append(out, lw,
			pm("leader reads per term", "reads", []float64{per(steady.leader.reads)}),
			pm("waiting candidate requests per term", "requests", fr).withFloor(termMs/pollMs, 0).
				withNote(fmt.Sprintf("T/P = %.1f; polls come up to P/4 early against herding", termMs/(pollMs))),
			pm("watcher requests per term", "requests", wrd).withNote(fmt.Sprintf("T/Pw = %.0f", termMs/watchPollMs)))
	}
	t := b.tally.snapshot()
	lim := c.cp.profile.WriteLimit
	allowed := lim.Rate + float64(max(lim.Burst, 1)) - 1
	pk := pm("most writes sent to one object in 1 s", "writes", []float64{float64(t.peakWrites)})
	pk = pk.withTarget(fmt.Sprintf("≤ the store's %.0f/s", lim.Rate), float64(t.peakWrites) <= allowed)
	st := b.shaper.Stats()
	out = append(out, pk.withNote("all participants together, every scenario; writes sent (retries by the store client excluded)"),
		pm("throttled answers from the store", "requests", []float64{float64(st.Throttled)}).
			withNote(fmt.Sprintf("of %d writes sent to the store; %d reached the engine as throttled (after the client's retries); by scenario: %s",
				st.Requests[faultproxy.OpWrite], t.throttled, strings.Join(throttledIn, ", "))))
	held := float64(t.held) / float64(s.term)
	lost := pm("leadership lost without a crash", "tenures", []float64{float64(t.lostTotal())})
	lost = lost.withTarget("0", t.lostTotal() == 0)
	var why []string
	for r, n := range t.lost {
		why = append(why, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(why)
	note := fmt.Sprintf("in %.0f terms held (soak: %d lone leaders x %d terms, plus every scenario)", held, elections, terms)
	if len(why) > 0 {
		note += "; " + strings.Join(why, ", ") + " (" + strings.Join(lostIn, ", ") + ")"
	}
	out = append(out, lost.withNote(note))
	res.Metrics = out
	return res, nil
}

// printProfiles writes one Markdown table per profile, a column per sizing
// row: median / p99, and the floor with the ratio where there is one.
func printProfiles(w io.Writer, r *ProfileReport) {
	m := r.Machine
	fmt.Fprintf(w, "Machine: %s, %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", m.CPUModel, m.NumCPU, m.GOMAXPROC, m.GOOS, m.GOARCH, m.GoVersion)
	fmt.Fprintf(w, "Command: %s\n", r.Command)
	fmt.Fprintf(w, "Repetitions: %d per scenario (p99 is the largest sample below 100); steady state over %d terms; %d combinations at once.\n", r.Reps, r.Steady, r.Jobs)
	fmt.Fprintln(w, "Figures at real speed: each run scales every duration and latency by its factor and the results back.")
	for _, src := range r.Profiles {
		for _, name := range []string{src.Name, src.Name + legacySuffix} {
			printProfile(w, r, src, name)
		}
	}
	fmt.Fprintf(w, "\nRun took %.0f s.\n", r.Seconds)
}

// printProfile prints the table of the results named name (a profile, or its
// legacy run) of profile src.
func printProfile(w io.Writer, r *ProfileReport, src ProfileSource, name string) {
	var res []ProfileResult
	for _, x := range r.Results {
		if x.Profile == name {
			res = append(res, x)
		}
	}
	if len(res) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### %s (backend %s): reads %.0f / %.0f ms, conditional writes %.0f / %.0f ms (median / p99), %g writes/s per object\n\n",
		name, src.Backend, src.ReadP50, src.ReadP99, src.WriteP50, src.WriteP99, src.WriteRate)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprint(tw, "| metric |")
	for _, x := range res {
		fmt.Fprintf(tw, " %s: %.0f s / %.1f s (x%g) |", x.Sizing, x.TermMs/1000, x.SkewMs/1000, x.Scale)
	}
	fmt.Fprint(tw, "\n|---|")
	for range res {
		fmt.Fprint(tw, "---|")
	}
	fmt.Fprintln(tw)
	var cols []ProfileResult
	for _, x := range res {
		if len(x.Metrics) > 0 {
			cols = append(cols, x)
		}
	}
	if len(cols) == 0 {
		cols = res[:1]
	}
	for i, mt := range cols[0].Metrics {
		fmt.Fprintf(tw, "| %s (%s) |", mt.Name, mt.Unit)
		for _, x := range res {
			if i >= len(x.Metrics) || x.Metrics[i].Name != mt.Name {
				fmt.Fprint(tw, " - |")
				continue
			}
			fmt.Fprintf(tw, " %s |", cell(x.Metrics[i]))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, x := range res {
		for _, e := range x.Errors {
			fmt.Fprintf(w, "ERROR %s/%s: %s\n", x.Profile, x.Sizing, e)
		}
	}
}

// cell formats one figure: "median / p99", then the floor and the ratio.
func cell(m PMetric) string {
	if m.N == 0 {
		return "-"
	}
	var s string
	switch {
	case m.N == 1:
		s = num(m.Median, m.Unit)
	case strings.HasPrefix(m.Name, "store "):
		// A store's stalls show in its slowest request.
		s = num(m.Median, m.Unit) + " / " + num(m.P99, m.Unit) + " (max " + num(m.Max, m.Unit) + ")"
	default:
		s = num(m.Median, m.Unit) + " / " + num(m.P99, m.Unit)
	}
	if m.Floor > 0 {
		s += fmt.Sprintf(" (floor %s, ×%.1f", num(m.Floor, m.Unit), m.Ratio)
		if m.Expected > 0 {
			s += fmt.Sprintf("; exp. %s, ×%.1f", num(m.Expected, m.Unit), m.Median/m.Expected)
		}
		s += ")"
	}
	if m.Met != nil {
		if *m.Met {
			s += " ✓"
		} else {
			s += " ✗"
		}
	}
	return s
}

func num(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case unit == "ms" && math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case unit == "ms":
		return fmt.Sprintf("%.1f", v)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
