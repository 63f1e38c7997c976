package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	clocks "github.com/vimeo/go-clocks"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
)

// watchLog runs a watcher and records its reports as "kind leader term",
// with terms counted from the first one reported (the first record's number
// comes from the clock).
type watchLog struct {
	mu        sync.Mutex
	events    []string
	errs      int
	firstTerm *int64
}

func (w *watchLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.events, "; ")
}

func startWatch(t *testing.T, cfg leaderelection.WatchConfig) (*watchLog, func()) {
	w := &watchLog{}
	cfg.OnError = func(context.Context, error) { w.mu.Lock(); w.errs++; w.mu.Unlock() }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- cfg.Watch(ctx, func(_ context.Context, c leaderelection.Change) {
			w.mu.Lock()
			if w.firstTerm == nil {
				w.firstTerm = &c.Entry.Term
			}
			w.events = append(w.events, fmt.Sprintf("%v %s %d", c.Kind, c.Entry.LeaderID, c.Entry.Term-*w.firstTerm))
			w.mu.Unlock()
		})
	}()
	return w, func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	}
}

// TestWatchReportsEachChangeOnce follows an election from before the first
// leader through extensions, a release, a takeover and an expiry, with and
// without push notifications.
func TestWatchReportsEachChangeOnce(t *testing.T) {
	for _, push := range []bool{true, false} {
		t.Run(fmt.Sprintf("push=%v", push), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.NewDecider()
				var d leaderelection.RaceDecider = &faultyDecider{RaceDecider: mem}
				if push {
					d = pushingFaultyDecider{d.(*faultyDecider)}
				}
				w, stopWatch := startWatch(t, leaderelection.WatchConfig{Decider: d, MaxClockSkew: skew})
				time.Sleep(term) // a watch on an empty store waits quietly
				synctest.Wait()
				if w.String() != "" {
					t.Fatalf("reports before any election: %s", w)
				}
				m := newMonitor(t)
				stopA := runCandidate(t, baseConfig(mem, "a", m, nil))
				next(m)
				time.Sleep(term + term/10)  // two extensions
				stopA()                     // release
				time.Sleep(2 * time.Second) // two polls see the released record
				cutB := &faultyDecider{RaceDecider: mem}
				stopB := runCandidate(t, baseConfig(cutB, "b", m, nil))
				next(m)
				cutB.failAll.Store(true) // b's term will run out
				time.Sleep(2 * term)
				synctest.Wait()
				want := "elected a 0; extended a 0; extended a 0; released a 0; elected b 4; expired b 4"
				if got := w.String(); got != want {
					t.Errorf("watcher reported\n  %s\nwant\n  %s", got, want)
				}
				stopB()
				stopWatch()
			})
		})
	}
}

func TestWatchRetriesReadErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		f := &faultyDecider{RaceDecider: mem}
		f.failAll.Store(true)
		w, stop := startWatch(t, leaderelection.WatchConfig{Decider: f, PollInterval: time.Second})
		m := newMonitor(t)
		stopA := runCandidate(t, baseConfig(mem, "a", m, nil))
		next(m)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if w.errs == 0 || w.String() != "" {
			t.Fatalf("while reads fail: %d errors reported, events %q", w.errs, w)
		}
		f.failAll.Store(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := w.String(); !strings.HasPrefix(got, "elected a 0") {
			t.Errorf("after reads recover the watcher reported %q, want the leader", got)
		}
		stopA()
		stop()
	})
}

func TestWatchValidate(t *testing.T) {
	err := leaderelection.WatchConfig{MaxClockSkew: -time.Second, PollInterval: -1}.Watch(t.Context(), nil)
	for _, want := range []string{"nil Decider", "MaxClockSkew (-1s) must not be negative", "PollInterval (-1ns) must be between 0 and 24h0m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Watch error %v does not contain %q", err, want)
		}
	}
	err = leaderelection.WatchConfig{Decider: (*memory.Decider)(nil), Observer: (*leaderelection.HealthCheck)(nil)}.Watch(t.Context(), nil)
	for _, want := range []string{"Decider is a nil *memory.Decider", "Observer is a nil *leaderelection.HealthCheck"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Watch error %v does not contain %q", err, want)
		}
	}
	// "Never poll, the store pushes" is a day at most: the poll schedule
	// spans many intervals, and would overflow.
	err = leaderelection.WatchConfig{Decider: memory.NewDecider(), PollInterval: math.MaxInt64}.Watch(t.Context(), nil)
	if want := "PollInterval (2562047h47m16.854775807s) must be between 0 and 24h0m0s"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Watch error %v does not contain %q", err, want)
	}
	// A poll too short to mean anything but reading continuously.
	err = leaderelection.WatchConfig{Decider: memory.NewDecider(), PollInterval: time.Microsecond}.Watch(t.Context(), nil)
	if want := "PollInterval (1µs) must be at least 1ms"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Watch error %v does not contain %q", err, want)
	}
	// A valid config with no callback, on a record there is to report.
	mem := memory.NewDecider()
	if _, err := mem.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, Term: 1, LeaderID: "a", TermExpiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	err = leaderelection.WatchConfig{Decider: mem}.Watch(t.Context(), nil)
	if want := "nil callback"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Watch error %v does not contain %q", err, want)
	}
}

// swappable reads from whichever decider it holds, to model a record that
// was deleted and whose elections began again.
type swappable struct {
	mu  sync.Mutex
	cur leaderelection.RaceDecider
}

func (s *swappable) get() leaderelection.RaceDecider {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *swappable) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	return s.get().ReadCurrent(ctx)
}

func (s *swappable) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	return s.get().WriteEntry(ctx, e)
}

func TestWatchSeesRecordRecreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := memory.NewDecider()
		sw := &swappable{cur: old}
		w, stopWatch := startWatch(t, leaderelection.WatchConfig{Decider: sw, MaxClockSkew: skew})
		m := newMonitor(t)
		stopA := runCandidate(t, baseConfig(old, "a", m, nil))
		next(m)
		time.Sleep(2 * term) // a's election number climbs with extensions
		stopA()
		fresh := memory.NewDecider()
		sw.mu.Lock()
		sw.cur = fresh
		sw.mu.Unlock()
		stopB := runCandidate(t, baseConfig(fresh, "b", newMonitor(t), nil))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := w.String(); !strings.Contains(got, "elected b") || strings.Contains(got[strings.LastIndex(got, "elected b"):], ";") {
			t.Errorf("after the record was recreated the watcher reported %q, want it to end with b's election", got)
		}
		stopB()
		stopWatch()
	})
}

// deafPush claims to push changes but delivers none: every wait runs to its
// deadline, which vouches that nothing changed.
type deafPush struct{ leaderelection.RaceDecider }

func (deafPush) WaitForChange(ctx context.Context, _ entry.LeaderToken) (*entry.RaceEntry, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestWatchStalePushesDoNotLoop checks that a push channel that keeps
// handing back a record already reported (one that lags behind a deletion,
// or misbehaves) makes the watcher poll, not wait again at once in a loop.
func TestWatchStalePushesDoNotLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		m := newMonitor(t)
		stopA := runCandidate(t, baseConfig(mem, "a", m, nil))
		next(m)
		old, err := mem.ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sp := &stalePush{RaceDecider: mem, old: old}
		w, stopWatch := startWatch(t, leaderelection.WatchConfig{Decider: sp, MaxClockSkew: skew, PollInterval: time.Second})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		sp.mu.Lock()
		waits := sp.waits
		sp.mu.Unlock()
		// Stale pushes come once per poll at most: about 10 in 10 s.
		if waits > 20 {
			t.Errorf("%d waits on a channel that hands back a stale record, in 10 s of 1 s polls; want one per poll or fewer", waits)
		}
		if got := w.String(); !strings.Contains(got, "extended a") {
			t.Errorf("the watcher reported %q; want the extensions it polled", got)
		}
		stopWatch()
		stopA()
	})
}

// stalePush answers every wait at once with the record old, already
// superseded; after 1000 waits it blocks instead, so that a watcher that
// loops on it still lets virtual time pass.
type stalePush struct {
	leaderelection.RaceDecider
	old   *entry.RaceEntry
	mu    sync.Mutex
	waits int
}

func (s *stalePush) WaitForChange(ctx context.Context, _ entry.LeaderToken) (*entry.RaceEntry, error) {
	s.mu.Lock()
	s.waits++
	n := s.waits
	s.mu.Unlock()
	if n > 1000 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.old.Clone(), nil
}

// brokenPush claims to push changes but its notifications always fail.
type brokenPush struct{ leaderelection.RaceDecider }

func (brokenPush) WaitForChange(context.Context, entry.LeaderToken) (*entry.RaceEntry, error) {
	return nil, errInjected
}

// TestWatchBrokenNotifierReads checks that a push channel that fails, or
// that vouches for quiet while delivering nothing (a listener behind a
// pooler that drops notifications), makes the watcher read, rather than
// take the silence for an expiry.
func TestWatchBrokenNotifierReads(t *testing.T) {
	for name, wrap := range map[string]func(leaderelection.RaceDecider) leaderelection.RaceDecider{
		"failing": func(d leaderelection.RaceDecider) leaderelection.RaceDecider { return brokenPush{d} },
		"deaf":    func(d leaderelection.RaceDecider) leaderelection.RaceDecider { return deafPush{d} },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.NewDecider()
				m := newMonitor(t)
				stopA := runCandidate(t, baseConfig(mem, "a", m, nil))
				next(m)
				w, stopWatch := startWatch(t, leaderelection.WatchConfig{Decider: wrap(mem), MaxClockSkew: skew})
				time.Sleep(3 * term)
				synctest.Wait()
				if got := w.String(); strings.Contains(got, "expired") || !strings.Contains(got, "extended a 0") {
					t.Errorf("with a %s notifier the watcher reported %q; want extensions and no expiry", name, got)
				}
				stopWatch()
				stopA()
			})
		})
	}
}

// blackHoled makes every read hang until its context ends while holed is
// set, as a connection that stopped answering; pushes go through.
type blackHoled struct {
	*memory.Decider
	holed, failing atomic.Bool
}

func (b *blackHoled) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if b.holed.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if b.failing.Load() {
		return nil, errors.New("503 Service Unavailable")
	}
	return b.Decider.ReadCurrent(ctx)
}

// firstReport starts cfg.Watch, until the test ends, and returns a function
// that waits (an hour at most) for its first report and says how long after
// the start it came.
func firstReport(t *testing.T, cfg leaderelection.WatchConfig) func() time.Duration {
	start := time.Now()
	reported := make(chan time.Duration, 1)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() {
		_ = cfg.Watch(ctx, func(context.Context, leaderelection.Change) {
			select {
			case reported <- time.Since(start):
			default:
			}
		})
	}()
	return func() time.Duration {
		select {
		case at := <-reported:
			return at
		case <-time.After(time.Hour):
			t.Fatal("no report within an hour")
			return 0
		}
	}
}

// TestWatchHungReadIsAbandoned: a watcher with a long PollInterval (on a
// store that pushes, where polls are rare) abandons a read that gets no
// answer after 10 s and retries it no later than that: the read used to be
// given 4 x PollInterval, and the retries to back off as far, so that one
// hung read blinded it for 4 minutes.
func TestWatchHungReadIsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		d := &blackHoled{Decider: mem}
		d.holed.Store(true)
		first := firstReport(t, leaderelection.WatchConfig{Decider: d, MaxClockSkew: skew, PollInterval: time.Minute})
		time.Sleep(time.Second)
		d.holed.Store(false) // answered again, from 1 s on
		m := newMonitor(t)
		stop := runCandidate(t, baseConfig(mem, "a", m, nil))
		defer stop()
		next(m)
		if at := first(); at > 12*time.Second {
			t.Errorf("first report %v after the start, with the store answering from 1 s; want within the read timeout (10 s) and a retry", at)
		}
	})
}

// TestWatchRetriesAsOftenAsItPolls: after a minute of failed reads, a
// watcher finds the store back within about a PollInterval (1 s by
// default): its retries back off no further than that. They used to back
// off to the read timeout, 10 s, so that one outage in several ended within
// 1.5 s of a retry by chance: hence outages of several lengths.
func TestWatchRetriesAsOftenAsItPolls(t *testing.T) {
	for i := range 6 {
		outage := time.Minute + time.Duration(i)*1700*time.Millisecond
		synctest.Test(t, func(t *testing.T) {
			mem := memory.NewDecider()
			m := newMonitor(t)
			stop := runCandidate(t, baseConfig(mem, "a", m, nil))
			defer stop()
			next(m)
			d := &blackHoled{Decider: mem}
			d.failing.Store(true)
			first := firstReport(t, leaderelection.WatchConfig{Decider: d, MaxClockSkew: skew})
			time.Sleep(outage)
			d.failing.Store(false)
			if at := first(); at > outage+1500*time.Millisecond {
				t.Errorf("first report %v after the start, with reads failing for the first %v; want within about a PollInterval (1 s) of it", at, outage)
			}
		})
	}
}

// TestWatchErrorsNameTheStore: what a watcher tells OnError names the store,
// so that a process watching several elections with one OnError can tell
// them apart.
func TestWatchErrorsNameTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &blackHoled{Decider: memory.NewDecider()}
		d.failing.Store(true)
		var got []string
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- leaderelection.WatchConfig{Decider: d, OnError: func(_ context.Context, err error) { got = append(got, err.Error()) }}.
				Watch(ctx, func(context.Context, leaderelection.Change) {})
		}()
		time.Sleep(5 * time.Second)
		cancel()
		<-done
		if len(got) == 0 {
			t.Fatal("no error told to OnError while every read failed")
		}
		for _, e := range got {
			if !strings.Contains(e, "watch on "+d.String()+":") {
				t.Errorf("OnError told %q, which does not name the store %s", e, d)
			}
		}
	})
}

// failingReads fails every read, and after limit of them ends the watch
// through cancel, so that a watcher that retries without waiting stops.
type failingReads struct {
	leaderelection.RaceDecider
	n      atomic.Int64
	limit  int64
	cancel context.CancelFunc
}

func (f *failingReads) ReadCurrent(context.Context) (*entry.RaceEntry, error) {
	if f.n.Add(1) >= f.limit {
		f.cancel()
	}
	return nil, errors.New("503 Service Unavailable")
}

// TestWatchRetryWaitsHoweverShortItsPoll: a watcher whose PollInterval is
// the shortest allowed still waits between failed reads (the backoff was a
// sixty-fourth of PollInterval at first, and at most PollInterval).
func TestWatchRetryWaitsHoweverShortItsPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		d := &failingReads{RaceDecider: memory.NewDecider(), limit: 10000, cancel: cancel}
		done := make(chan error, 1)
		go func() {
			done <- leaderelection.WatchConfig{Decider: d, PollInterval: time.Millisecond}.Watch(ctx, func(context.Context, leaderelection.Change) {})
		}()
		time.Sleep(time.Second)
		cancel()
		<-done
		// Backoff from 1 ms doubling to 64 ms: about 25 reads.
		if n := d.n.Load(); n > 100 {
			t.Errorf("%d failed reads in a second, with PollInterval 1ms; want a backoff between them", n)
		}
	})
}

// writeTerm writes the record that follows mem's current one: leader id's
// term (a new one if newTerm), ending at expiry.
func writeTerm(t *testing.T, mem *memory.Decider, id string, newTerm bool, expiry time.Time) {
	t.Helper()
	cur, err := mem.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e := &entry.RaceEntry{ElectionNumber: cur.ElectionNumber + 1, Term: cur.Term, LeaderID: id, TermExpiry: expiry,
		WriteID: fmt.Sprintf("w%d", cur.ElectionNumber+1), Token: cur.Token}
	if newTerm {
		e.Term = e.ElectionNumber
	}
	if _, err := mem.WriteEntry(t.Context(), e); err != nil {
		t.Fatal(err)
	}
}

// slowFirstRead answers its first read with the record as it was when the
// read began, but only after slow: a read that straddles what happens then.
type slowFirstRead struct {
	*faultyDecider
	slow time.Duration
	done atomic.Bool
}

func (s *slowFirstRead) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	rec, err := s.faultyDecider.ReadCurrent(ctx)
	if !s.done.Swap(true) {
		time.Sleep(s.slow)
	}
	return rec, err
}

// TestWatchSlowCallbackDoesNotFakeAnExpiry: a record read before its term's
// expiry says nothing of an extension written after the read, however late
// the watcher looks at it. A callback that ran past the expiry, or a read
// that did, made the watcher report the live leader's term expired, and then
// extended; now it reads again first.
func TestWatchSlowCallbackDoesNotFakeAnExpiry(t *testing.T) {
	for _, push := range []bool{true, false} {
		t.Run(fmt.Sprintf("callback/push=%v", push), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.NewDecider()
				writeTerm(t, mem, "a", true, time.Now().Add(10*time.Second))
				var d leaderelection.RaceDecider = &faultyDecider{RaceDecider: mem}
				if push {
					d = pushingFaultyDecider{d.(*faultyDecider)}
				}
				var calls atomic.Int32
				w := &watchLog{}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() {
					done <- leaderelection.WatchConfig{Decider: d, MaxClockSkew: skew}.Watch(ctx, func(_ context.Context, c leaderelection.Change) {
						w.mu.Lock()
						w.events = append(w.events, fmt.Sprintf("%v %s", c.Kind, c.Entry.LeaderID))
						w.mu.Unlock()
						if calls.Add(1) == 1 {
							time.Sleep(15 * time.Second) // past the expiry
						}
					})
				}()
				time.Sleep(5 * time.Second)
				writeTerm(t, mem, "a", false, time.Now().Add(20*time.Second)) // while the callback runs
				time.Sleep(15 * time.Second)
				synctest.Wait()
				if got, want := w.String(), "elected a; extended a"; got != want {
					t.Errorf("watcher reported\n  %s\nwant\n  %s", got, want)
				}
				time.Sleep(10 * time.Second) // the extension runs out
				synctest.Wait()
				if got, want := w.String(), "elected a; extended a; expired a"; got != want {
					t.Errorf("after the extension ran out the watcher reported\n  %s\nwant\n  %s", got, want)
				}
				cancel()
				<-done
			})
		})
		t.Run(fmt.Sprintf("read/push=%v", push), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.NewDecider()
				writeTerm(t, mem, "a", true, time.Now().Add(time.Second))
				s := &slowFirstRead{faultyDecider: &faultyDecider{RaceDecider: mem}, slow: 2 * time.Second}
				var d leaderelection.RaceDecider = s
				if push {
					d = struct {
						*slowFirstRead
						leaderelection.ChangeNotifier
					}{s, mem}
				}
				w, stop := startWatch(t, leaderelection.WatchConfig{Decider: d, MaxClockSkew: skew})
				time.Sleep(time.Second / 2)
				writeTerm(t, mem, "a", false, time.Now().Add(10*time.Second)) // while the first read is out
				time.Sleep(5 * time.Second)
				synctest.Wait()
				// The first read ended after the term it found: its
				// record is neither reported current nor expired, and
				// the next read's is the first report.
				if got, want := w.String(), "elected a 0"; got != want {
					t.Errorf("watcher reported\n  %s\nwant\n  %s", got, want)
				}
				time.Sleep(5 * time.Second) // the extension runs out
				synctest.Wait()
				if got, want := w.String(), "elected a 0; expired a 0"; got != want {
					t.Errorf("after the extension ran out the watcher reported\n  %s\nwant\n  %s", got, want)
				}
				if w.errs != 0 {
					t.Errorf("one read that outlasted its term told OnError %d times; want none (see TestWatchSaysWhenReadsOutlastTerms)", w.errs)
				}
				stop()
			})
		})
	}
}

// unsurePush delivers no change, and ends every wait with an error that does
// not wrap its context's: it vouches for nothing (a listener that is not up
// yet, or never gets there), so the watcher must read.
type unsurePush struct{ *faultyDecider }

func (unsurePush) WaitForChange(ctx context.Context, _ entry.LeaderToken) (*entry.RaceEntry, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("not listening yet (%v)", ctx.Err())
}

// TestWatchUnsureChannelPolls: a push channel whose waits end vouching for
// nothing is no channel at all: the watcher sees each change within about a
// PollInterval, as if polling. It used to wait on it up to 8 PollIntervals
// (or the whole term) between reads. A channel whose waits vouch is still
// read only every 8 PollIntervals.
func TestWatchUnsureChannelPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		writeTerm(t, mem, "a", true, time.Now().Add(time.Hour))
		w, stop := startWatch(t, leaderelection.WatchConfig{Decider: unsurePush{&faultyDecider{RaceDecider: mem}}, MaxClockSkew: skew})
		defer stop()
		for i, id := range []string{"b", "c", "d"} {
			time.Sleep(3*time.Second + time.Duration(i)*7*time.Second)
			writeTerm(t, mem, id, true, time.Now().Add(time.Hour))
			time.Sleep(1100 * time.Millisecond) // a PollInterval and a little
			synctest.Wait()
			if got := w.String(); !strings.HasSuffix(got, "elected "+id+" "+fmt.Sprint(i+1)) {
				t.Errorf("a PollInterval after %s's election the watcher reported %q", id, got)
			}
		}
	})
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		writeTerm(t, mem, "a", true, time.Now().Add(time.Hour))
		f := &faultyDecider{RaceDecider: mem}
		_, stop := startWatch(t, leaderelection.WatchConfig{Decider: deafPush{f}, MaxClockSkew: skew})
		defer stop()
		time.Sleep(80 * time.Second)
		synctest.Wait()
		if n := f.reads.Load(); n > 80/8+3 {
			t.Errorf("%d reads in 80 PollIntervals on a channel that vouches for its waits; want about one per 8", n)
		}
	})
}

// slowReads answers each read with the record as it was when the read began,
// but only after slow, while slow is set.
type slowReads struct {
	*faultyDecider
	slow atomic.Int64
}

func (s *slowReads) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	rec, err := s.faultyDecider.ReadCurrent(ctx)
	time.Sleep(time.Duration(s.slow.Load()))
	return rec, err
}

// TestWatchSaysWhenReadsOutlastTerms: a read that ends after the term it found
// is read again, as neither a leader nor an expiry. When every read does that
// (reads of 2 s, a leader that extends every second by 1.5 s), the watcher
// reports nothing, and used to say nothing either; now it tells OnError,
// once, and reports the leader as soon as reads get quicker.
func TestWatchSaysWhenReadsOutlastTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		writeTerm(t, mem, "a", true, time.Now().Add(1500*time.Millisecond))
		d := &slowReads{faultyDecider: &faultyDecider{RaceDecider: mem}}
		d.slow.Store(int64(2 * time.Second))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		writer := make(chan struct{})
		go func() {
			defer close(writer)
			for clocks.DefaultClock().SleepFor(ctx, time.Second) {
				writeTerm(t, mem, "a", false, time.Now().Add(1500*time.Millisecond))
			}
		}()
		w, stop := startWatch(t, leaderelection.WatchConfig{Decider: d, MaxClockSkew: skew})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		w.mu.Lock()
		errs, events := w.errs, len(w.events)
		w.mu.Unlock()
		if events != 0 || errs != 1 {
			t.Errorf("with every read outlasting its term for 20 s: %d errors told (want 1) and reports %q (want none)", errs, w)
		}
		d.slow.Store(0)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got, want := w.String(), "elected a 0"; !strings.HasPrefix(got, want) {
			t.Errorf("once reads were quick the watcher reported\n  %s\nwant first\n  %s", got, want)
		}
		stop()
		cancel()
		<-writer
	})
}

// TestWatchReportsAnExpiryReadsFailedAcross: reads that fail from before a
// term's expiry until another tenure has begun still report that expiry,
// before the new leader, as a watcher whose reads went through would have.
// The new leader used to be reported alone.
func TestWatchReportsAnExpiryReadsFailedAcross(t *testing.T) {
	for _, push := range []bool{false, true} {
		t.Run(fmt.Sprintf("push=%v", push), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.NewDecider()
				writeTerm(t, mem, "a", true, time.Now().Add(2*time.Second))
				f := &faultyDecider{RaceDecider: mem}
				var d leaderelection.RaceDecider = f
				if push {
					d = pushingFaultyDecider{f}
				}
				w, stop := startWatch(t, leaderelection.WatchConfig{Decider: d, MaxClockSkew: skew})
				time.Sleep(time.Second)
				synctest.Wait()
				f.failAll.Store(true) // from 1 s before a's expiry
				time.Sleep(3 * time.Second)
				writeTerm(t, mem, "b", true, time.Now().Add(10*time.Second)) // b takes over at 4 s
				time.Sleep(time.Second)
				f.failAll.Store(false)
				time.Sleep(2 * time.Second)
				synctest.Wait()
				if got, want := w.String(), "elected a 0; expired a 0; elected b 1"; got != want {
					t.Errorf("watcher reported\n  %s\nwant\n  %s", got, want)
				}
				stop()
			})
		})
	}
}
