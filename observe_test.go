package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	clocks "github.com/vimeo/go-clocks"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/skewclock"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []leaderelection.Event
}

func (r *recorder) Observe(e leaderelection.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// of returns the events of kind k.
func (r *recorder) of(k leaderelection.EventKind) []leaderelection.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []leaderelection.Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// lastOffset returns the last clock offset reported.
func (r *recorder) lastOffset(t *testing.T) leaderelection.ClockOffset {
	t.Helper()
	offs := r.of(leaderelection.EventClockOffset)
	if len(offs) == 0 {
		t.Fatal("no clock offset reported")
	}
	return offs[len(offs)-1].Offset
}

// refusingDecider refuses every write, as a store without write permission
// does.
type refusingDecider struct{ leaderelection.RaceDecider }

func (refusingDecider) WriteEntry(context.Context, *entry.RaceEntry) (entry.LeaderToken, error) {
	return entry.LeaderToken{}, fmt.Errorf("test store: 403 access denied: %w", entry.ErrRefused)
}

// secondsDecider reports commit times in whole seconds (truncated), as S3's
// Last-Modified and HTTP's Date do.
type secondsDecider struct{ leaderelection.RaceDecider }

func (s secondsDecider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	rec, err := s.RaceDecider.ReadCurrent(ctx)
	if err == nil {
		rec.Token.CommitTime = rec.Token.CommitTime.Truncate(time.Second)
	}
	return rec, err
}

func (s secondsDecider) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	tok, err := s.RaceDecider.WriteEntry(ctx, e)
	tok.CommitTime = tok.CommitTime.Truncate(time.Second)
	return tok, err
}

// oddStart moves a synctest bubble's clock off the whole second it starts
// on, so that commit times have a sub-second part as real clocks' do (a
// commit time in whole seconds is taken for a store's 1 s precision).
func oddStart() { time.Sleep(123456789 * time.Nanosecond) }

func TestObserverSeesHandOverAndFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oddStart()
		mem := memory.NewDecider()
		m := newMonitor(t)
		obs := map[string]*recorder{"a": {}, "b": {}, "c": {}}
		access := map[string]racedecidertest.Access{}
		start := func(id string) *racedecidertest.Candidate {
			access[id] = racedecidertest.Cuttable(mem)
			cfg := baseConfig(access[id].Decider, id, m, nil)
			cfg.Observer = obs[id]
			return racedecidertest.StartCandidate(t.Context(), cfg)
		}
		a := start("a")
		if tn := next(m); tn.ID != "a" {
			t.Fatalf("first elected %s, want a", tn.ID)
		}
		b := start("b")
		c := start("c")
		// Between two of a's extensions: on the zero-latency store they
		// fall on whole half-terms, and a stop at that very instant could
		// cancel one (timers due together run in any order).
		time.Sleep(2*term + term/8)
		a.Stop(t) // hand-over
		second := next(m)
		// Crash failover: the new leader loses the store.
		access[second.ID].Cut(true)
		third := next(m)
		synctest.Wait()

		ra := obs["a"]
		if n := len(ra.of(leaderelection.EventElected)); n != 1 {
			t.Errorf("a: %d elected events, want 1", n)
		}
		if n := len(ra.of(leaderelection.EventExtended)); n < 3 {
			t.Errorf("a: %d extended events in 2 terms, want about 4", n)
		}
		if o := ra.of(leaderelection.EventOusted); len(o) != 1 || o[0].Reason != leaderelection.OustShutdown {
			t.Errorf("a: ousted events %+v, want one for shutdown", o)
		}
		if s := ra.of(leaderelection.EventStopped); len(s) != 1 || !errors.Is(s[0].Err, context.Canceled) {
			t.Errorf("a: stopped events %+v, want one with context.Canceled", s)
		}
		for _, e := range ra.of(leaderelection.EventStoreRequest) {
			if e.Result != leaderelection.ResultOK || e.Election != "memory" {
				t.Errorf("a: store request %+v, want ok, on the store the Cuttable wraps (memory)", e)
			}
		}
		rs := obs[second.ID]
		if o := rs.of(leaderelection.EventOusted); len(o) != 1 || o[0].Reason != leaderelection.OustExpired || o[0].Term != second.Term {
			t.Errorf("%s: ousted events %+v, want one for expiry of term %d", second.ID, o, second.Term)
		}
		var failed int
		for _, e := range rs.of(leaderelection.EventStoreRequest) {
			if e.Result == leaderelection.ResultUnknown && e.Op == leaderelection.OpWrite {
				failed++
			}
		}
		if failed == 0 {
			t.Errorf("%s: no write with an unknown outcome reported while cut off", second.ID)
		}
		changes := obs[third.ID].of(leaderelection.EventLeaderChanged)
		var ids []string
		for _, e := range changes {
			ids = append(ids, e.LeaderID)
		}
		if got, want := strings.Join(ids, ","), "a,"+second.ID+","+third.ID; got != want {
			t.Errorf("%s saw leaders %s, want %s", third.ID, got, want)
		}
		// One clock: every write bounds the offset to exactly zero.
		if off := ra.lastOffset(t); off.Low != 0 || off.High != 0 || !off.HighKnown {
			t.Errorf("offset %v on a shared clock, want [0, 0]", off)
		}
		access[second.ID].Cut(false)
		b.Stop(t)
		c.Stop(t)
	})
}

func TestObserverSeesRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		hc := &leaderelection.HealthCheck{}
		cfg := baseConfig(refusingDecider{memory.NewDecider()}, "a", newMonitor(t), nil)
		cfg.Observer = leaderelection.Observers(rec, nil, hc)
		err := cfg.Acquire(t.Context())
		if !errors.Is(err, entry.ErrRefused) {
			t.Fatalf("Acquire returned %v, want ErrRefused", err)
		}
		reqs := rec.of(leaderelection.EventStoreRequest)
		if last := reqs[len(reqs)-1]; last.Op != leaderelection.OpWrite || last.Result != leaderelection.ResultRefused {
			t.Errorf("last request %+v, want a refused write", last)
		}
		if s := rec.of(leaderelection.EventStopped); len(s) != 1 || !errors.Is(s[0].Err, entry.ErrRefused) {
			t.Errorf("stopped events %+v, want one with ErrRefused", s)
		}
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("health check after a refusal: %v, want the refusal", err)
		}
		// A watcher on the same Decider (one election to the check),
		// whose reads pass, does not hide it.
		_, stop := startWatch(t, leaderelection.WatchConfig{Decider: cfg.Decider, MaxClockSkew: skew, Observer: hc})
		time.Sleep(term)
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("health check after a refusal, a watcher reading: %v, want the refusal", err)
		}
		stop()
	})
}

// TestClockOffsetFromWrites runs a candidate whose clock is off the store's
// (memory's commit time is the real clock: virtual in the bubble) and checks
// the bound contains the true offset, is as tight as the store's precision
// allows, and warns past MaxClockSkew/4.
func TestClockOffsetFromWrites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		off     time.Duration // this host's clock minus the store's
		seconds bool          // the store reports whole seconds
		warn    bool
	}{
		{"exact/ahead", 300 * time.Millisecond, false, true},
		{"exact/behind", -200 * time.Millisecond, false, false},
		{"exact/same", 0, false, false},
		{"seconds/ahead", 3 * time.Second, true, true},
		{"seconds/behind", -2500 * time.Millisecond, true, true},
		{"seconds/small", 100 * time.Millisecond, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				oddStart()
				var d leaderelection.RaceDecider = memory.NewDecider()
				if tc.seconds {
					d = secondsDecider{d}
				}
				rec := &recorder{}
				m := newMonitor(t)
				cfg := baseConfig(d, "a", m, skewclock.New(clocks.DefaultClock(), tc.off))
				cfg.Observer = rec
				if tc.seconds {
					// Skews of seconds need a longer term.
					cfg.MaxClockSkew, cfg.TermLength = 4*time.Second, time.Minute
				}
				stop := runCandidate(t, cfg)
				next(m)
				time.Sleep(3 * cfg.TermLength)
				synctest.Wait()
				off := rec.lastOffset(t)
				want := -tc.off // the store's clock minus this host's
				if off.Low > want || off.High < want || !off.HighKnown {
					t.Errorf("offset bound %v does not contain %v", off, want)
				}
				width := off.High - off.Low
				if !tc.seconds && width != 0 {
					t.Errorf("offset bound %v on a store with exact commit times and instant writes, want width 0", off)
				}
				if tc.seconds && width > 3*time.Second {
					t.Errorf("offset bound %v wider than three times the store's precision", off)
				}
				warnings := rec.of(leaderelection.EventClockWarning)
				if got := len(warnings) > 0; got != tc.warn {
					t.Errorf("clock warnings %+v, want some: %v", warnings, tc.warn)
				}
				if len(warnings) > 1 {
					t.Errorf("%d clock warnings for one lasting offset, want 1", len(warnings))
				}
				stop()
			})
		})
	}
}

// TestEnforceMaxClockSkewStepsDown: a candidate whose clock is further than
// MaxClockSkew/2 from the store's learns it on its first write, steps down at
// once, and does not campaign again while its evidence is fresh; a candidate
// with a good clock leads instead.
func TestEnforceMaxClockSkewStepsDown(t *testing.T) {
	for _, off := range []time.Duration{-800 * time.Millisecond, 700 * time.Millisecond} {
		t.Run(off.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				oddStart()
				mem := memory.NewDecider()
				m := newMonitor(t)
				rec := &recorder{}
				cfg := baseConfig(mem, "skewed", m, skewclock.New(clocks.DefaultClock(), off))
				cfg.Observer, cfg.EnforceMaxClockSkew = rec, true
				var elected int
				inner := cfg.OnElected
				cfg.OnElected = func(ctx context.Context, tv *leaderelection.TimeView) {
					elected++
					inner(ctx, tv)
				}
				stopSkewed := runCandidate(t, cfg)
				first := next(m)
				if first.ID != "skewed" {
					t.Fatalf("elected %s, want the only candidate", first.ID)
				}
				// It steps down a nanosecond after learning it (see lead).
				time.Sleep(time.Millisecond)
				synctest.Wait()
				o := rec.of(leaderelection.EventOusted)
				if len(o) != 1 || o[0].Reason != leaderelection.OustClockSkew {
					t.Fatalf("ousted events %+v, want one for clock skew", o)
				}
				if first.Ended.Sub(first.Start) > time.Second {
					t.Errorf("stepped down %v after its election, want at once", first.Ended.Sub(first.Start))
				}
				stopGood := runCandidate(t, baseConfig(mem, "good", m, nil))
				if tn := next(m); tn.ID != "good" {
					t.Errorf("elected %s, want good", tn.ID)
				}
				time.Sleep(2 * term)
				stopGood()
				// With the good candidate gone, the skewed one stays out
				// while its samples are fresh.
				time.Sleep(2 * term)
				synctest.Wait()
				if elected != 1 {
					t.Errorf("skewed candidate elected %d times, want once", elected)
				}
				stopSkewed()
			})
		})
	}
}

// TestEnforceMaxClockSkewTieWithOnElected: the write that wins the term
// shows the clock too far, and OnElected returns at that same instant. The
// tenure's end must not hang on which goroutine ran first: OnElected's
// return is seen first, every time (a release, not a step-down for skew).
func TestEnforceMaxClockSkewTieWithOnElected(t *testing.T) {
	for i := range 20 {
		synctest.Test(t, func(t *testing.T) {
			oddStart()
			rec := &recorder{}
			cfg := baseConfig(memory.NewDecider(), "skewed", nil, skewclock.New(clocks.DefaultClock(), 700*time.Millisecond))
			cfg.Observer, cfg.EnforceMaxClockSkew = rec, true
			cfg.OnElected = func(context.Context, *leaderelection.TimeView) {}
			stop := runCandidate(t, cfg)
			time.Sleep(term)
			synctest.Wait()
			o := rec.of(leaderelection.EventOusted)
			if len(o) == 0 || o[0].Reason != leaderelection.OustReleased {
				t.Errorf("run %d: ousted events %+v, want the first for a release", i, o)
			}
			stop()
		})
	}
}

func TestHealthCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		hc := &leaderelection.HealthCheck{Tolerance: time.Second, MaxQuiet: 4 * term}
		// A leader whose OnElected ignores its context: wedged.
		release := make(chan struct{})
		elected := make(chan struct{})
		var tenures atomic.Int32
		acc := racedecidertest.Cuttable(mem)
		cfg := leaderelection.Config{Decider: acc.Decider, LeaderID: "a", TermLength: term, MaxClockSkew: skew, Observer: hc,
			OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
				if tenures.Add(1) > 1 {
					<-ctx.Done()
					return
				}
				close(elected)
				<-release
			}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- cfg.Acquire(ctx) }()
		<-elected
		serve := func() (int, string) {
			w := httptest.NewRecorder()
			hc.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			return w.Code, w.Body.String()
		}
		if code, body := serve(); code != http.StatusOK {
			t.Errorf("leading: %d %s, want 200", code, body)
		}
		time.Sleep(2 * term)
		if code, body := serve(); code != http.StatusOK {
			t.Errorf("leading and extending: %d %s, want 200", code, body)
		}
		acc.Cut(true)
		time.Sleep(term + 2*time.Second)
		code, body := serve()
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "still leading") {
			t.Errorf("wedged leader: %d %q, want 503 naming the expired term", code, body)
		}
		close(release)
		synctest.Wait()
		time.Sleep(term) // quiet, but not yet for MaxQuiet
		if err := hc.Check(); err != nil {
			t.Errorf("after stepping down: %v, want healthy", err)
		}
		time.Sleep(3 * term)
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "no answer from the store") {
			t.Errorf("cut off for 5 terms: %v, want unhealthy for quiet", err)
		}
		acc.Cut(false)
		time.Sleep(term)
		if err := hc.Check(); err != nil {
			t.Errorf("store back: %v, want healthy", err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire: %v", err)
		}
		if err := hc.Check(); err != nil {
			t.Errorf("stopped: %v, want healthy", err)
		}
	})
}

// TestHealthCheckStandbyOnPushStore: a waiting candidate on a store that
// pushes changes reads nothing while its leader lives (each extension is
// pushed to it), and is healthy all the same; cut off from the store, it is
// not.
func TestHealthCheckStandbyOnPushStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := newMonitor(t)
		stopA := runCandidate(t, baseConfig(mem, "a", m, nil))
		next(m)
		hc := &leaderelection.HealthCheck{MaxQuiet: term}
		acc := racedecidertest.Cuttable(mem)
		cfg := baseConfig(acc.Decider, "b", m, nil)
		cfg.Observer = hc
		stopB := runCandidate(t, cfg)
		time.Sleep(3 * term)
		synctest.Wait()
		if err := hc.Check(); err != nil {
			t.Errorf("a waiting candidate woken by each extension: %v, want healthy", err)
		}
		acc.Cut(true)
		time.Sleep(2 * term)
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "no answer from the store") {
			t.Errorf("a waiting candidate cut off for 2 terms: %v, want unhealthy for quiet", err)
		}
		acc.Cut(false)
		stopB()
		stopA()
	})
}

// TestHealthCheckLeaderAndRestart: a leader, which writes only every half
// term, is not judged by MaxQuiet (its expiry tells); and an election whose
// Acquire stopped and is called again is judged again.
func TestHealthCheckLeaderAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hc := &leaderelection.HealthCheck{MaxQuiet: term / 4}
		acc := racedecidertest.Cuttable(memory.NewDecider())
		cfg := baseConfig(acc.Decider, "a", newMonitor(t), nil)
		cfg.Observer = hc
		stop := runCandidate(t, cfg)
		// Between two extensions, longer than MaxQuiet after the last.
		time.Sleep(2*term + 3*term/10)
		synctest.Wait()
		if err := hc.Check(); err != nil {
			t.Errorf("a leader extending every half term, MaxQuiet a quarter: %v, want healthy", err)
		}
		stop()
		acc.Cut(true)
		stop = runCandidate(t, cfg)
		time.Sleep(2 * term)
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "no answer from the store") {
			t.Errorf("Acquire called again, cut off from the store for 2 terms: %v, want unhealthy for quiet", err)
		}
		acc.Cut(false)
		stop()
	})
}

func TestWatchObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := newMonitor(t)
		rec := &recorder{}
		w := leaderelection.WatchConfig{Decider: mem, MaxClockSkew: skew, Observer: rec}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Watch(ctx, func(context.Context, leaderelection.Change) {}) }()
		stop := runCandidate(t, baseConfig(mem, "a", m, nil))
		next(m)
		time.Sleep(term)
		stop()
		synctest.Wait()
		var kinds []string
		for _, e := range rec.of(leaderelection.EventWatchChange) {
			kinds = append(kinds, e.Change.String())
		}
		if got := strings.Join(kinds, ","); !strings.HasPrefix(got, "elected,extended") || !strings.HasSuffix(got, "released") {
			t.Errorf("watch changes %s, want elected, extensions, released", got)
		}
		ops := map[string]int{}
		for _, e := range rec.of(leaderelection.EventStoreRequest) {
			ops[string(e.Op)+" "+string(e.Result)]++
		}
		// A read at start, then waits on the push channel: each change
		// (an election, extensions, the release) ends one.
		if ops["read ok"] == 0 || ops["wait ok"] < len(kinds)-1 {
			t.Errorf("store requests %v; want reads and a wait per pushed change (%d changes)", ops, len(kinds))
		}
		cancel()
		<-done
	})
}

// A push channel that fails is reported as failed waits, each followed by
// a poll.
func TestObserverSeesFailedWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := &brokenChannel{RaceDecider: memory.NewDecider()}
		w := leaderelection.WatchConfig{Decider: b, PollInterval: time.Second, Observer: rec}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Watch(ctx, func(context.Context, leaderelection.Change) {}) }()
		// Not on a whole second, when the watcher's polls and waits come:
		// a wait at the very instant of the cancel is reported canceled.
		time.Sleep(10*time.Second + 500*time.Millisecond)
		cancel()
		<-done
		ops := map[string]int{}
		for _, e := range rec.of(leaderelection.EventStoreRequest) {
			ops[string(e.Op)+" "+string(e.Result)]++
		}
		if n := b.waits.Load(); ops["wait error"] != int(n) || n < 5 || ops["read ok"] < int(n) {
			t.Errorf("store requests %v after %d failed waits; want each wait reported failed, and a read after each", ops, n)
		}
	})
}

// A wait that runs its course on a channel that cannot vouch for it (not up
// yet) is no answer: the Observer sees it as a failed wait, not an ok one
// (which HealthCheck would count as the store answering).
func TestObserverSeesUnvouchedWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		w := leaderelection.WatchConfig{Decider: notVouching{memory.NewDecider()}, PollInterval: time.Second, Observer: rec}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Watch(ctx, func(context.Context, leaderelection.Change) {}) }()
		time.Sleep(30*time.Second + 500*time.Millisecond)
		cancel()
		<-done
		ops := map[string]int{}
		for _, e := range rec.of(leaderelection.EventStoreRequest) {
			ops[string(e.Op)+" "+string(e.Result)]++
		}
		if ops["wait ok"] != 0 || ops["wait error"] == 0 {
			t.Errorf("store requests %v; want every wait the channel could not vouch for reported failed", ops)
		}
	})
}

// notVouching is a push channel that never comes up: each wait ends at its
// deadline with an error of its own, which vouches for nothing.
type notVouching struct{ leaderelection.RaceDecider }

func (notVouching) WaitForChange(ctx context.Context, _ entry.LeaderToken) (*entry.RaceEntry, error) {
	<-ctx.Done()
	return nil, errors.New("test channel: not connected yet")
}

// A shutdown that interrupts an acquisition whose write was applied but
// answered with an error reads the record once more and releases it; the
// Observer sees that read and the release like every other request.
func TestObserverSeesReleaseOfInterruptedAcquisition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		mem := memory.NewDecider()
		f := &faultyDecider{RaceDecider: mem}
		ctx, cancel := context.WithCancel(t.Context())
		f.applyThenFail.Store(1)
		f.afterWrite = func() {
			if f.writes.Load() == 1 {
				cancel() // the caller stops while the acquisition is in flight
			}
		}
		cfg := baseConfig(f, "a", newMonitor(t), nil)
		cfg.Observer = rec
		if err := cfg.Acquire(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want context.Canceled", err)
		}
		if got, err := mem.ReadCurrent(t.Context()); err != nil || got.LeaderID != "a" || !got.Released {
			t.Fatalf("record after shutdown = %+v, %v; want a's term, released", got, err)
		}
		ops := map[leaderelection.StoreOp]int64{}
		for _, e := range rec.of(leaderelection.EventStoreRequest) {
			ops[e.Op]++
		}
		if ops[leaderelection.OpRead] != f.reads.Load() || ops[leaderelection.OpWrite] != f.writes.Load() {
			t.Errorf("Observer saw %d reads and %d writes; the store served %d and %d", ops[leaderelection.OpRead], ops[leaderelection.OpWrite], f.reads.Load(), f.writes.Load())
		}
	})
}

// namedDecider is a Decider whose name is not UTF-8, as a file path's may
// be.
type namedDecider struct {
	leaderelection.RaceDecider
	name string
}

func (d namedDecider) String() string { return d.name }

func TestEventElectionIsUTF8(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		cfg := leaderelection.Config{
			Decider:  namedDecider{memory.NewDecider(), "file:///srv/\xff\xfe/élection"},
			LeaderID: "a", TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond, Observer: &rec,
			OnElected: func(context.Context, *leaderelection.TimeView) {},
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go cfg.Acquire(ctx)
		synctest.Wait()
		got := rec.of(leaderelection.EventElected)
		// Each byte that is not UTF-8 is spelt out, so that two such names
		// stay apart; UTF-8 is kept.
		if want := `file:///srv/\xff\xfe/élection`; len(got) == 0 || got[0].Election != want {
			t.Fatalf("elected events %+v, want one for election %q", got, want)
		}
	})
}

func TestObserversLeavesOutNilPointers(t *testing.T) {
	var rec recorder
	if o := leaderelection.Observers(nil, (*leaderelection.HealthCheck)(nil), leaderelection.ObserverFunc(nil)); o != nil {
		t.Errorf("Observers of nils = %#v, want nil", o)
	}
	o := leaderelection.Observers((*recorder)(nil), &rec, leaderelection.ObserverFunc(nil))
	o.Observe(leaderelection.Event{Kind: leaderelection.EventStarted})
	if got := rec.of(leaderelection.EventStarted); len(got) != 1 {
		t.Errorf("the one Observer among nil pointers saw %d events, want 1", len(got))
	}
}

// TestEventElectionKeepsNamesApart: two names that are not UTF-8 and differ
// stay apart in Event.Election, one with a literal `\xff` among them: the
// backslash of such a name is spelt `\\`. Both were spelt `a\xff\xfe`, one
// election's metrics series to leprom and leotel.
func TestEventElectionKeepsNamesApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{`a\xff` + "\xfe", "a\xff\xfe"}
		var got []string
		for _, name := range names {
			var rec recorder
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- leaderelection.WatchConfig{Decider: namedDecider{memory.NewDecider(), name}, Observer: &rec}.Watch(ctx, func(context.Context, leaderelection.Change) {})
			}()
			synctest.Wait()
			cancel()
			<-done
			ev := rec.of(leaderelection.EventWatchStarted)
			if len(ev) == 0 || !utf8.ValidString(ev[0].Election) {
				t.Fatalf("watch on %q: started events %+v; want one naming the election in UTF-8", name, ev)
			}
			got = append(got, ev[0].Election)
		}
		if got[0] == got[1] {
			t.Errorf("the elections %q and %q are both named %q", names[0], names[1], got[0])
		}
		if want := `a\\xff\xfe`; got[0] != want {
			t.Errorf("election %q is named %q, want %q", names[0], got[0], want)
		}
	})
}
