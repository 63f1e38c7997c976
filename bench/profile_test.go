package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/internal/testenv"
)

// TestThrottledAnswers sends writes to each backend's emulator through its
// profile's Shaper with a write limit no write can meet after the first:
// the store's own throttled answer (status, code and body as the real
// service sends it) must come out of the backend, past its client's
// retries, as entry.ErrThrottled.
func TestThrottledAnswers(t *testing.T) {
	for _, cp := range cloudProfiles {
		t.Run(cp.name, func(t *testing.T) {
			if srv, ok := servers[cp.backend]; ok {
				testenv.Server(t, srv.env, srv.name, srv.start)
			}
			p := faultproxy.Profile{WriteLimit: faultproxy.Limit{Rate: 1e-6, Burst: 1}}
			shape := func(next http.RoundTripper) *faultproxy.Shaper {
				return faultproxy.NewShaper(next, cp.store, p, 1)
			}
			b, err := newShapedBackend(t.Context(), cp.backend, &settings{}, shape, cp.name)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.close)
			d, err := b.newStore(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if cl, ok := d.(io.Closer); ok {
				t.Cleanup(func() { _ = cl.Close() })
			}
			rec := leaderRecord()
			tok, err := d.WriteEntry(t.Context(), rec)
			if err != nil {
				t.Fatalf("first write: %v", err)
			}
			rec.Token, rec.ElectionNumber, rec.WriteID = tok, 1, "second"
			_, err = d.WriteEntry(t.Context(), rec)
			if !errors.Is(err, entry.ErrThrottled) {
				t.Fatalf("write past the limit: %v, want ErrThrottled", err)
			}
			if st := b.shaper.Stats(); st.Throttled == 0 || st.Requests[faultproxy.OpWrite] < 2 {
				t.Errorf("shaper stats %+v: want the second write throttled", st)
			}
			// Reads are not limited and see the first write.
			got, err := d.ReadCurrent(t.Context())
			if err != nil || got.WriteID != leaderRecord().WriteID {
				t.Fatalf("read after the throttled write: %+v, %v; want the first write", got, err)
			}
		})
	}
}

// TestQuickProfileRun runs two profiles at one sizing row, tiny, each also on
// the legacy schedule, and checks the JSON holds every figure for each.
// Figures are printed, never asserted. s3express runs on versitygw.
func TestQuickProfileRun(t *testing.T) {
	profiles := []string{"gcs", "s3express"}
	for _, cp := range cloudProfiles {
		if srv, ok := servers[cp.backend]; ok && slices.Contains(profiles, cp.name) {
			testenv.Server(t, srv.env, srv.name, srv.start)
		}
	}
	path := filepath.Join(t.TempDir(), "profiles.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-profile", strings.Join(profiles, ","), "-sizing", "quick", "-quick", "-scale", "0.15",
		"-soak-terms", "4", "-legacy", "-json", path}
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep ProfileReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Profile)
	}
	slices.Sort(got)
	if want := []string{"gcs", "gcs legacy", "s3express", "s3express legacy"}; !slices.Equal(got, want) || len(rep.Profiles) != 2 {
		t.Fatalf("results for %q, %d profiles; want %q and 2", got, len(rep.Profiles), want)
	}
	for _, r := range rep.Results {
		if len(r.Errors) > 0 {
			t.Errorf("%s/%s: %v", r.Profile, r.Sizing, r.Errors)
		}
		if r.Sizing != "quick" || r.TermMs != 4000 || r.Scale != 0.15 {
			t.Errorf("%s: sizing %s, term %v ms, scale %v", r.Profile, r.Sizing, r.TermMs, r.Scale)
		}
		names := map[string]bool{}
		for _, m := range r.Metrics {
			names[m.Name] = true
			if m.N == 0 {
				t.Errorf("%s: %s has no samples", r.Profile, m.Name)
			}
		}
		for _, want := range []string{"graceful hand-over: cancel → next leader", "crash failover past TermExpiry + MaxClockSkew",
			"observer lag: new leader → watcher told", "leader writes per term", "throttled answers from the store",
			"leadership lost without a crash", "most writes sent to one object in 1 s"} {
			if !names[want] {
				t.Errorf("%s: no %q", r.Profile, want)
			}
		}
	}
	for _, want := range []string{"### gcs", "### gcs legacy", "### s3express legacy", "| graceful hand-over", "JSON written to"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestProfileFlags(t *testing.T) {
	s, err := parseFlags([]string{"-profile", "all"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.profiles) != len(cloudProfiles) || len(s.sizings) != len(sizingRows) || s.reps != 20 || s.soakTerms != 1000 {
		t.Errorf("-profile all gave %+v", s)
	}
	if !strings.HasSuffix(s.jsonPath, "results-profiles.json") {
		t.Errorf("default JSON path %q", s.jsonPath)
	}
	for _, args := range [][]string{
		{"-profile", "nope"},
		{"-profile", "gcs", "-sizing", "nope"},
		{"-profile", "gcs", "-scale", "2"},
		{"-profile", "gcs", "-jobs", "0"},
	} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) accepted it", args)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var xs []float64
	for i := range 200 {
		xs = append(xs, float64(i+1))
	}
	if n, med, p99 := pctl(xs); n != 200 || med != 100.5 || p99 != 198 {
		t.Errorf("pctl(1..200) = %d, %v, %v", n, med, p99)
	}
	if _, med, p99 := pctl([]float64{3, 1, 2}); med != 2 || p99 != 3 {
		t.Errorf("pctl(3 samples) = %v, %v; want the largest as p99", med, p99)
	}
}

// A candidate gets the store's write interval through its access, as it
// would from the store's own Decider: the -profile gcs rows depend on it.
func TestAccessPassesOnTheWriteInterval(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Second} {
		b, err := newShapedBackend(t.Context(), "gcs", &settings{writeInterval: interval}, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		inner, err := b.newStore(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		d := newElection(inner, false, 0, &rttLog{}).newAccess("c").decider()
		ws, ok := d.(leaderelection.WriteSpacer)
		if ok {
			if got := ws.MinWriteInterval(); got != interval {
				t.Errorf("interval %v: the access declares %v", interval, got)
			}
		} else if interval > 0 {
			t.Errorf("interval %v: the access (%T) declares none", interval, d)
		}
		b.close()
	}
}
