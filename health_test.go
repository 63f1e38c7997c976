package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// TestHealthCheckWatchStopped: a Watch whose context ends (the component
// that watched is shut down; the process goes on) is no longer judged by
// MaxQuiet: nothing follows the election any more.
func TestHealthCheckWatchStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		hc := &leaderelection.HealthCheck{MaxQuiet: 4 * time.Second} // several WatchConfig.PollIntervals (1 s)
		_, stop := startWatch(t, leaderelection.WatchConfig{Decider: mem, Observer: hc})
		time.Sleep(10 * time.Second)
		if err := hc.Check(); err != nil {
			t.Fatalf("watching: %v, want healthy", err)
		}
		stop() // Watch returns context.Canceled: stopped on purpose
		time.Sleep(time.Minute)
		if err := hc.Check(); err != nil {
			t.Errorf("a minute after the only watch was stopped on purpose: %v, want healthy", err)
		}

		// A watch that the store's refusal ends is reported, even once
		// another watch on the election, started before, is stopped on
		// purpose.
		hc = &leaderelection.HealthCheck{MaxQuiet: 4 * time.Second}
		_, stop = startWatch(t, leaderelection.WatchConfig{Decider: mem, Observer: hc})
		synctest.Wait()
		w := leaderelection.WatchConfig{Decider: refusingReads{mem}, Observer: hc}
		if err := w.Watch(t.Context(), func(context.Context, leaderelection.Change) {}); !errors.Is(err, entry.ErrRefused) {
			t.Fatalf("Watch: %v, want a refusal", err)
		}
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "Watch ended") {
			t.Errorf("after a refusal ended the watch: %v, want it reported", err)
		}
		stop()
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "Watch ended") {
			t.Errorf("after the other watch was stopped: %v, want the refusal still reported", err)
		}
	})
}

// refusingReads refuses every read, as a store without read permission. It
// is named as the store it wraps: one election to HealthCheck.
type refusingReads struct{ leaderelection.RaceDecider }

func (r refusingReads) String() string { return fmt.Sprint(r.RaceDecider) }

func (refusingReads) ReadCurrent(context.Context) (*entry.RaceEntry, error) {
	return nil, fmt.Errorf("403 Forbidden: %w", entry.ErrRefused)
}

// TestHealthCheckPauseAfterEarlyReturn: OnElected returning while the term
// is held ends the tenure and the candidate pauses at least a TermLength
// (doubling with each such tenure in a row) before campaigning again,
// without a single store request. That pause is not quiet (EventPaused).
func TestHealthCheckPauseAfterEarlyReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		hc := &leaderelection.HealthCheck{MaxQuiet: term}
		var firstBad, bad atomic.Value
		var tenures atomic.Int32
		cfg := leaderelection.Config{Decider: mem, LeaderID: "a", TermLength: term, MaxClockSkew: skew, Observer: hc,
			OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
				// A job that does one piece of work per tenure and
				// yields: a second of work, then return.
				tenures.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- cfg.Acquire(ctx) }()
		// Probe every 10 s, as a kubelet does (periodSeconds: 10).
		for range 12 {
			time.Sleep(10 * time.Second)
			if err := hc.Check(); err != nil {
				if firstBad.Load() == nil {
					firstBad.Store(err.Error())
				}
				bad.Store(err.Error())
			}
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire: %v", err)
		}
		if tenures.Load() < 2 {
			t.Fatalf("%d tenures in 2 minutes, want several", tenures.Load())
		}
		if e := firstBad.Load(); e != nil {
			t.Errorf("a candidate pausing between tenures on a healthy store was judged unhealthy: %v", e)
		}
	})
}

// TestHealthCheckWatchJudgedThroughPause: a candidate's pause after an early
// return makes no request, but a Watch on the same election reads on: one
// cut off from the store during the pause is reported within MaxQuiet, not
// only MaxQuiet after the pause (which reaches 8 to 16 TermLengths). A Watch
// started during the pause is judged from its start, not from the last
// request before the pause.
func TestHealthCheckWatchJudgedThroughPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acc := racedecidertest.Cuttable(memory.NewDecider())
		hc := &leaderelection.HealthCheck{MaxQuiet: 30 * time.Second}
		_, stopPause := startLongPause(t, acc.Decider, hc)
		defer stopPause()
		time.Sleep(hc.MaxQuiet + time.Second)
		acc.Cut(true)
		defer acc.Cut(false)
		_, stop := startWatch(t, leaderelection.WatchConfig{Decider: acc.Decider, Observer: hc})
		defer stop()
		synctest.Wait()
		if err := hc.Check(); err != nil {
			t.Fatalf("a watch started %v into a pause, its reads failing: %v, want healthy until MaxQuiet", hc.MaxQuiet+time.Second, err)
		}
		time.Sleep(hc.MaxQuiet + 10*time.Second) // 72 s into a pause of 80 s or more
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "no answer from the store") {
			t.Errorf("the watch cut off for MaxQuiet + 10 s, during the candidate's pause: %v, want it reported", err)
		}
	})
}

// TestHealthCheckQuietFromPauseEnd: a candidate makes no request during its
// pause, so MaxQuiet counts from the pause's end, and the report says so:
// one cut off from the store since before its pause is reported MaxQuiet
// after the pause ended, with the quiet measured from there.
func TestHealthCheckQuietFromPauseEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acc := racedecidertest.Cuttable(memory.NewDecider())
		hc := &leaderelection.HealthCheck{MaxQuiet: 30 * time.Second}
		end, stop := startLongPause(t, acc.Decider, hc)
		defer stop()
		acc.Cut(true)
		defer acc.Cut(false)
		time.Sleep(time.Until(end) + hc.MaxQuiet - time.Second)
		if err := hc.Check(); err != nil {
			t.Fatalf("cut off since before a pause that ended MaxQuiet - 1 s ago: %v, want healthy", err)
		}
		time.Sleep(2 * time.Second)
		want := fmt.Sprintf("no answer from the store for %s since its candidates' pause ended (MaxQuiet %s)", hc.MaxQuiet+time.Second, hc.MaxQuiet)
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("cut off since before a pause that ended MaxQuiet + 1 s ago: %v, want it reported as %q", err, want)
		}
	})
}

// TestHealthCheckPauseEndsWithItsAcquire: a candidate's pause excuses no
// other Acquire on the election: not one that runs beside it, nor one
// started after it was stopped, on a store it cannot reach (both used to be
// judged only once the pause would have ended). The two Cuttables on one
// store are one election to HealthCheck.
func TestHealthCheckPauseEndsWithItsAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		accA, accB := racedecidertest.Cuttable(mem), racedecidertest.Cuttable(mem)
		hc := &leaderelection.HealthCheck{MaxQuiet: 20 * time.Second}
		_, stopWatch := startWatch(t, leaderelection.WatchConfig{Decider: accA.Decider, Observer: hc})
		_, stopA := startLongPause(t, accA.Decider, hc)
		accB.Cut(true)
		defer accB.Cut(false)
		campaignB := func(id string) (stop func()) {
			cfg := leaderelection.Config{Decider: accB.Decider, LeaderID: id, TermLength: term, MaxClockSkew: skew, Observer: hc,
				OnElected: func(ctx context.Context, _ *leaderelection.TimeView) { <-ctx.Done() }}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- cfg.Acquire(ctx) }()
			return func() {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("Acquire %s: %v", id, err)
				}
			}
		}
		check := func(when string) {
			t.Helper()
			if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "no answer from the store") {
				t.Errorf("%s: %v, want it reported", when, err)
			}
		}

		// b beside a, in a's pause, once the watch is stopped.
		stopB := campaignB("b")
		stopWatch()
		time.Sleep(hc.MaxQuiet + 5*time.Second)
		check("b cut off beside a paused a")
		stopB()

		// a stopped in its pause and c started in its place, while a
		// watch runs (so that nothing is judged afresh), then the watch
		// stopped. (50 s into a's pause of 80 s or more.)
		_, stopWatch = startWatch(t, leaderelection.WatchConfig{Decider: accA.Decider, Observer: hc})
		synctest.Wait()
		stopA()
		defer campaignB("c")()
		synctest.Wait()
		stopWatch()
		time.Sleep(hc.MaxQuiet + 5*time.Second)
		check("c cut off, started once a was stopped in its pause")
	})
}

// startLongPause campaigns on d with an OnElected that returns at once, so
// that its pauses double, until one of 8 terms or more begins. It returns
// when that pause ends, and a func that stops the Acquire and waits for it
// to return.
func startLongPause(t *testing.T, d leaderelection.RaceDecider, hc *leaderelection.HealthCheck) (end time.Time, stop func()) {
	longPause := make(chan struct{})
	var once sync.Once
	obs := leaderelection.Observers(hc, leaderelection.ObserverFunc(func(e leaderelection.Event) {
		if e.Kind == leaderelection.EventPaused && time.Until(e.Expiry) >= 8*term {
			once.Do(func() {
				end = e.Expiry
				close(longPause)
			})
		}
	}))
	cfg := leaderelection.Config{Decider: d, LeaderID: "a", TermLength: term, MaxClockSkew: skew, Observer: obs,
		OnElected: func(context.Context, *leaderelection.TimeView) {}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cfg.Acquire(ctx) }()
	<-longPause
	if err := hc.Check(); err != nil {
		t.Fatalf("at the start of a long pause: %v, want healthy", err)
	}
	return end, func() {
		cancel()
		<-done
	}
}

// TestHealthCheckReleasingIsNotLeading: once OnElected has returned, the
// release write may run until TermExpiry + MaxClockSkew, past Tolerance
// when MaxClockSkew is above it. EventOusted comes before the release, so
// HealthCheck does not report such a process "still leading".
func TestHealthCheckReleasingIsNotLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tl, sk = time.Minute, 15 * time.Second
		var hang atomic.Bool // writes hang until their context ends
		d := &slowWrites{RaceDecider: memory.NewDecider(), delay: func(int64) time.Duration {
			if hang.Load() {
				return -1
			}
			return 0
		}}
		hc := &leaderelection.HealthCheck{}
		var returned atomic.Bool
		stop := make(chan struct{})
		cfg := leaderelection.Config{Decider: d, LeaderID: "a", TermLength: tl, MaxClockSkew: sk, Observer: hc,
			OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
				select {
				case <-ctx.Done():
				case <-stop:
				}
				returned.Store(true)
			}}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- cfg.Acquire(ctx) }()
		time.Sleep(tl/2 + time.Second) // just after the first extension
		synctest.Wait()
		// The store stops answering writes; OnElected returns (its work
		// is done) while the term is still held: a release is sent and
		// hangs until TermExpiry + MaxClockSkew.
		hang.Store(true)
		time.Sleep(tl/2 - 2*time.Second) // before the next extension
		close(stop)
		synctest.Wait()
		if !returned.Load() {
			t.Fatal("OnElected did not return")
		}
		time.Sleep(tl/2 + 2*time.Second + 12*time.Second) // past expiry + Tolerance, before expiry + MaxClockSkew
		if err := hc.Check(); err != nil && strings.Contains(err.Error(), "still leading") {
			t.Errorf("OnElected has returned; the engine is releasing: %v", err)
		}
		hang.Store(false)
		cancel()
		<-done
	})
}

// hungReadBack: once broken is set, writes fail at once with an unknown
// outcome (a reset), and from then on reads hang until their context ends.
type hungReadBack struct {
	leaderelection.RaceDecider
	broken, wrote atomic.Bool
}

func (h *hungReadBack) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	if h.broken.Load() {
		h.wrote.Store(true)
		return entry.LeaderToken{}, errors.New("connection reset by peer")
	}
	return h.RaceDecider.WriteEntry(ctx, e)
}

func (h *hungReadBack) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if h.wrote.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.RaceDecider.ReadCurrent(ctx)
}

// TestReadBackCutByTermIsNotCanceled: the read-back of an acquisition whose
// outcome is unknown runs under the deadline of the term it asked for. A
// read the store leaves hanging until then failed: it is not ResultCanceled
// ("the caller's context ended"), which alerts on errors would not see.
func TestReadBackCutByTermIsNotCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &hungReadBack{RaceDecider: memory.NewDecider()}
		d.broken.Store(true) // reads work until the first write
		rec := &recorder{}
		cfg := baseConfig(d, "a", newMonitor(t), nil)
		cfg.Observer = rec
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- cfg.Acquire(ctx) }()
		time.Sleep(2 * term)
		synctest.Wait()
		if ctx.Err() != nil || !d.wrote.Load() {
			t.Fatal("test bug")
		}
		for _, e := range rec.of(leaderelection.EventStoreRequest) {
			if e.Result == leaderelection.ResultCanceled {
				t.Errorf("%s reported %s (err %v) while Acquire's context was live", e.Op, e.Result, e.Err)
			}
		}
		cancel()
		<-done
	})
}

// TestHealthCheckStandbyDuringFailover: a standby on a store that pushes
// changes reads nothing while its leader extends (each extension is
// pushed); once the leader crashes it waits, unwoken, until the takeover
// time, TermLength + MaxClockSkew + its herd draw after the last push. With
// MaxQuiet as HealthCheck's doc advises, it stays healthy.
func TestHealthCheckStandbyDuringFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := newMonitor(t)
		accA := racedecidertest.Cuttable(mem)
		stopA := runCandidate(t, baseConfig(accA.Decider, "a", m, nil))
		next(m)
		hc := &leaderelection.HealthCheck{MaxQuiet: 2 * (term + skew)}
		cfg := baseConfig(mem, "b", m, nil)
		cfg.Observer = hc
		stopB := runCandidate(t, cfg)
		time.Sleep(2*term + term/4) // between two of a's extensions
		synctest.Wait()
		accA.Cut(true) // a's host loses the store: a crash, to b
		var elected atomic.Bool
		go func() { next(m); elected.Store(true) }()
		var bad error
		for !elected.Load() {
			time.Sleep(100 * time.Millisecond)
			if err := hc.Check(); err != nil && bad == nil {
				bad = err
			}
		}
		if bad != nil {
			t.Errorf("standby b, its store answering, during a's failover: %v", bad)
		}
		accA.Cut(false)
		stopB()
		stopA()
	})
}

// TestHealthCheckWedgedBesideAnotherAcquire: a process whose OnElected
// ignores its context is reported however many other Acquires on the
// election start, lead and stop meanwhile (one used to clear it by
// starting, and another's term to stand for it).
func TestHealthCheckWedgedBesideAnotherAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		accA, accB := racedecidertest.Cuttable(mem), racedecidertest.Cuttable(mem)
		hc := &leaderelection.HealthCheck{}
		elected, unblock := make(chan struct{}), make(chan struct{})
		cfgA := leaderelection.Config{Decider: accA.Decider, LeaderID: "a", TermLength: term, MaxClockSkew: skew, Observer: hc,
			OnElected: func(context.Context, *leaderelection.TimeView) { close(elected); <-unblock }}
		ctxA, cancelA := context.WithCancel(t.Context())
		doneA := make(chan error, 1)
		go func() { doneA <- cfgA.Acquire(ctxA) }()
		<-elected
		accA.Cut(true)
		time.Sleep(term + leaderelection.DefaultHealthTolerance + time.Second)
		check := func(when string) {
			t.Helper()
			if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "still leading term") {
				t.Errorf("%s: %v, want a reported still leading", when, err)
			}
		}
		check("a wedged")
		cfgB := leaderelection.Config{Decider: accB.Decider, LeaderID: "b", TermLength: term, MaxClockSkew: skew, Observer: hc,
			OnElected: func(ctx context.Context, _ *leaderelection.TimeView) { <-ctx.Done() }}
		b := racedecidertest.StartCandidate(t.Context(), cfgB)
		synctest.Wait()
		check("b started, and elected")
		b.Stop(t)
		synctest.Wait()
		check("b stopped")
		close(unblock)
		cancelA()
		accA.Cut(false)
		<-doneA
	})
}

// TestHealthCheckAcquireStartedInAPause: an Acquire started while every
// other one on the election is in a pause is judged from its start, not
// from the last answer before the pause.
func TestHealthCheckAcquireStartedInAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		accB := racedecidertest.Cuttable(mem)
		hc := &leaderelection.HealthCheck{MaxQuiet: 20 * time.Second}
		_, stopA := startLongPause(t, mem, hc)
		defer stopA()
		time.Sleep(50 * time.Second)
		accB.Cut(true)
		defer accB.Cut(false)
		b := racedecidertest.StartCandidate(t.Context(), leaderelection.Config{Decider: accB.Decider, LeaderID: "b", TermLength: term, MaxClockSkew: skew, Observer: hc,
			OnElected: func(ctx context.Context, _ *leaderelection.TimeView) { <-ctx.Done() }})
		defer b.Stop(t)
		synctest.Wait()
		if err := hc.Check(); err != nil {
			t.Errorf("b started, cut off, 50 s into a's pause: %v, want healthy until MaxQuiet from its start", err)
		}
		time.Sleep(hc.MaxQuiet + time.Second)
		if err := hc.Check(); err == nil || !strings.Contains(err.Error(), "no answer from the store") {
			t.Errorf("b cut off for MaxQuiet + 1 s: %v, want it reported", err)
		}
	})
}
