package legrpc_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/legrpc"
	"github.com/racedecider/leaderelection/memory"
)

// A leader that extends on schedule (every half term, each write moving the
// expiry a whole term ahead) is never reported gone. On a polled store whose
// PollInterval is up to a term long (a legal, cost-saving setting), the
// watcher learns of each extension by its read at the known expiry, at the
// instant the resolver's own timer ends the term: that timer reads before it
// ends anything. (It used to hand gRPC no address and ErrNoLeader first,
// dropping every client's connection.)
func TestResolverNoFlapOnTimelyExtensions(t *testing.T) {
	for _, poll := range []time.Duration{3 * time.Second, 5 * time.Second, 6 * time.Second, 10 * time.Second} {
		t.Run(poll.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const term = 10 * time.Second
				p := &polling{d: memory.NewDecider()}
				put(t, p, "a", true, time.Now().Add(term), nil)
				ctx, stop := context.WithCancel(t.Context())
				defer stop()
				go func() { // the leader: extends every half term
					for {
						select {
						case <-ctx.Done():
							return
						case <-time.After(term / 2):
						}
						put(t, p, "a", false, time.Now().Add(term), nil)
					}
				}()
				rec, r := build(t, leaderelection.WatchConfig{Decider: p, MaxClockSkew: time.Second, PollInterval: poll})
				defer r.Close()
				time.Sleep(20 * term)
				stop()
				synctest.Wait()
				rec.mu.Lock()
				defer rec.mu.Unlock()
				empty := 0
				for _, s := range rec.states {
					if len(s.Addresses) == 0 {
						empty++
					}
				}
				noLeader := 0
				for _, err := range rec.errs {
					if errors.Is(err, legrpc.ErrNoLeader) {
						noLeader++
					}
				}
				if empty > 0 || noLeader > 0 {
					t.Errorf("a leader that extended on time every half term: gRPC got %d states with no address and %d ErrNoLeader errors over 20 terms (%d states in all); first error: %v",
						empty, noLeader, len(rec.states), first(rec.errs))
				}
			})
		})
	}
}

func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// nilReader answers ReadCurrent with neither a record nor an error once
// broken is set: a Decider that breaks its contract, which the watcher and
// the resolver's first read turn into an error.
type nilReader struct {
	polling
	broken atomic.Bool
}

func (n *nilReader) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if n.broken.Load() {
		return nil, nil
	}
	return n.polling.ReadCurrent(ctx)
}

// The read the resolver makes at a term's expiry survives a Decider that
// answers with neither a record nor an error. (It panicked.)
func TestResolverEnderNilRecordNoPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &nilReader{polling: polling{d: memory.NewDecider()}}
		put(t, store.d, "a", true, time.Now().Add(3*time.Second), nil)
		_, r := build(t, leaderelection.WatchConfig{Decider: store, MaxClockSkew: time.Second, PollInterval: time.Minute})
		defer r.Close()
		synctest.Wait()
		store.broken.Store(true)
		time.Sleep(4 * time.Second) // the ender fires at the expiry and reads
		synctest.Wait()
	})
}

// silentPush is a store whose push channel went silent without failing (a
// dropped subscription the store never reports): every wait runs to its
// deadline and vouches that nothing changed.
type silentPush struct{ polling }

func (s *silentPush) WaitForChange(ctx context.Context, _ entry.LeaderToken) (*entry.RaceEntry, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// On a store that pushes, ResolveNow reads too: when the watcher's channel
// has gone silent, a failed connection to the former leader is followed
// within PollInterval/4, as on a polled store, rather than at the watcher's
// next scheduled read (8 x PollInterval, or the old term's expiry).
func TestResolveNowWithSilentPushChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = time.Second
		store := &silentPush{polling: polling{d: memory.NewDecider()}}
		put(t, store, "a", true, time.Now().Add(15*time.Second), nil)
		rec, r := build(t, leaderelection.WatchConfig{Decider: store, MaxClockSkew: time.Second, PollInterval: poll})
		defer r.Close()
		synctest.Wait()
		if got := rec.addrs(); len(got) != 1 || got[0] != "a:443" {
			t.Fatalf("resolved %q, want a:443", got)
		}
		time.Sleep(time.Second)
		// a releases and b is elected: the channel brings neither.
		put(t, store, "a", false, time.Now(), func(e *entry.RaceEntry) { e.Released = true })
		put(t, store, "b", true, time.Now().Add(15*time.Second), nil)
		// The connection to a fails: gRPC asks to resolve again, with its
		// own backoff, several times.
		for range 3 {
			r.ResolveNow(resolver.ResolveNowOptions{})
			time.Sleep(poll)
		}
		synctest.Wait()
		if got := rec.addrs(); len(got) != 1 || got[0] != "b:443" {
			t.Errorf("3 PollIntervals after b's election and 3 ResolveNow calls: resolved %q, want b:443", got)
		}
	})
}

// Build on a zero Builder or on NewBuilderFunc(nil) fails with an error. (It
// panicked inside gRPC's resolver serializer, taking the process down.)
func TestBuildZeroBuilderNoPanic(t *testing.T) {
	for name, b := range map[string]*legrpc.Builder{
		"zero Builder":        {},
		"NewBuilderFunc(nil)": legrpc.NewBuilderFunc(nil),
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Build panicked: %v", p)
				}
			}()
			target := resolver.Target{}
			target.URL.Scheme, target.URL.Path = legrpc.Scheme, "/e"
			r, err := b.Build(target, &recorder{}, resolver.BuildOptions{})
			if err == nil {
				r.Close()
				t.Error("Build succeeded without a lookup")
			}
		})
	}
}

// An OnElected that returns while the term is held steps down. The Guard
// drains the calls it admitted while the engine goes on extending the term;
// one handler that does not heed its context must not keep this process the
// leader for ever, rejecting every call while the resolver routes every
// client to it: the drain ends with the term as it stood at the step-down,
// and another candidate is elected.
func TestGuardEarlyReturnDrainIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const term = 10 * time.Second
		store := memory.NewDecider()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		stepDown, stuck := leaderWithStuckCall(t, ctx, store, term, nil)
		defer close(stuck)

		bElected := make(chan struct{}, 1)
		cfgB := leaderelection.Config{Decider: store, LeaderID: "b", TermLength: term, MaxClockSkew: time.Second,
			OnElected: func(ctx context.Context, _ *leaderelection.TimeView) {
				select {
				case bElected <- struct{}{}:
				default:
				}
				<-ctx.Done()
			}}
		go func() { _ = cfgB.Acquire(ctx) }()

		close(stepDown) // a steps down
		time.Sleep(10 * term)
		synctest.Wait()
		select {
		case <-bElected:
		default:
			rec, _ := store.ReadCurrent(t.Context())
			t.Errorf("10 terms after a stepped down, b was never elected: the record says %s leads (term %d, expiry in %v, released %v); a's Guard rejects every call",
				rec.LeaderID, rec.Term, time.Until(rec.TermExpiry), rec.Released)
		}
		cancel()
	})
}

// The same with the default PollInterval: one extension that lands late
// (its first attempt failed and the retry landed 300 ms before the expiry,
// well within the term) does not drop the clients' connection to the
// leader.
func TestResolverNoFlapOnLateExtension(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const term = 10 * time.Second
		p := &polling{d: memory.NewDecider()}
		expiry := time.Now().Add(term)
		put(t, p, "a", true, expiry, nil)
		rec, r := build(t, leaderelection.WatchConfig{Decider: p, MaxClockSkew: time.Second})
		defer r.Close()
		time.Sleep(time.Until(expiry) - 300*time.Millisecond)
		put(t, p, "a", false, time.Now().Add(term), nil) // the late extension
		time.Sleep(time.Second)
		synctest.Wait()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for i, s := range rec.states {
			if len(s.Addresses) == 0 {
				t.Errorf("state %d of %d handed gRPC no address (errors: %v)", i+1, len(rec.states), rec.errs)
			}
		}
	})
}

// The bounded drain never lets the engine release a term while a call
// admitted in it still runs: the step-down's term is left to expire. (A
// later term this process wins may be released: the call it outlived holds
// an ended TimeView.) OnElected returned early, so the candidate pauses
// before it campaigns again (it used to campaign at once).
func TestGuardNoReleaseWhileCallRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const term = 10 * time.Second
		store := memory.NewDecider()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// The pause after the step-down's tenure, and how many tenures
		// a had begun before it.
		var mu sync.Mutex
		var paused time.Duration
		elected, pausedAfter := 0, 0
		stepDown, stuck := leaderWithStuckCall(t, ctx, store, term, func(e leaderelection.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case e.Kind == leaderelection.EventElected:
				elected++
			case e.Kind == leaderelection.EventPaused && pausedAfter == 0:
				paused, pausedAfter = time.Until(e.Expiry), elected
			}
		})
		first, err := store.ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		close(stepDown)
		for range 300 { // 3 terms
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			rec, err := store.ReadCurrent(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if rec.Released && rec.Term == first.Term {
				t.Errorf("term %d was released while a call admitted in it still runs", first.Term)
				break
			}
		}
		mu.Lock()
		if pausedAfter != 1 || paused < term {
			t.Errorf("a first paused %v, after %d tenures (0: never); want a pause of a term or more after the first, whose OnElected returned early",
				paused, pausedAfter)
		}
		mu.Unlock()
		close(stuck)
		cancel()
	})
}

// leaderWithStuckCall elects "a", with a Guard, on store, and has the Guard
// admit a call that ignores its context and runs until stuck is closed.
// Closing stepDown makes a's OnElected return while the term is held. a's
// Observer is observe, if not nil.
func leaderWithStuckCall(t *testing.T, ctx context.Context, store leaderelection.RaceDecider, term time.Duration, observe leaderelection.ObserverFunc) (stepDown, stuck chan struct{}) {
	g := new(legrpc.Guard)
	stepDown, stuck = make(chan struct{}), make(chan struct{})
	var obs leaderelection.Observer
	if observe != nil {
		obs = observe
	}
	cfg := g.Attach(leaderelection.Config{Decider: store, LeaderID: "a", TermLength: term, MaxClockSkew: time.Second, Observer: obs,
		OnElected: func(ctx context.Context, _ *leaderelection.TimeView) {
			select {
			case <-ctx.Done():
			case <-stepDown: // e.g. it lost its database
			}
		}})
	go func() { _ = cfg.Acquire(ctx) }()
	synctest.Wait()
	if _, ok := g.Leading(); !ok {
		t.Fatal("a does not lead")
	}
	go func() {
		_, _ = g.UnaryServerInterceptor()(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/svc/Work"},
			func(context.Context, any) (any, error) { <-stuck; return nil, nil })
	}()
	synctest.Wait()
	return stepDown, stuck
}

// A record that turns corrupt after the resolver's first read is told to
// gRPC once no leader is known, so that calls fail with the cause rather
// than with a bare "term expired", and no longer once reads are answered
// again; a good record brings routing back. (Only OnError and the Logger
// used to hear of it.)
func TestResolverReportsARecordTurnedCorrupt(t *testing.T) {
	// The watcher retries a failing read with backoff up to 10 s.
	const watchBackoffCap = 11 * time.Second
	synctest.Test(t, func(t *testing.T) {
		const term = 10 * time.Second
		p := &polling{d: memory.NewDecider()}
		set := func(en int64, id string, expiry time.Time) {
			data, err := entry.Marshal(&entry.RaceEntry{ElectionNumber: en, Term: en, LeaderID: id,
				HostPort: []string{id + ":443"}, TermExpiry: expiry, WriteID: id})
			if err != nil {
				t.Fatal(err)
			}
			p.d.SetRaw(data)
		}
		corrupt := func() { p.d.SetRaw([]byte(`{"not": "a record"`)) }
		expiry := time.Now().Add(term)
		set(1, "a", expiry)
		rec, r := build(t, leaderelection.WatchConfig{Decider: p, MaxClockSkew: time.Second, PollInterval: time.Second})
		defer r.Close()
		lastErr := func() error {
			synctest.Wait()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return rec.errs[len(rec.errs)-1]
		}
		check := func(when string, wantCorrupt bool) {
			t.Helper()
			if err := lastErr(); !errors.Is(err, legrpc.ErrNoLeader) || errors.Is(err, entry.ErrCorruptRecord) != wantCorrupt {
				t.Errorf("%s: gRPC's last error is %v; want ErrNoLeader, carrying ErrCorruptRecord: %v", when, err, wantCorrupt)
			}
		}

		// Corrupt for a while mid-term, then the same record again: the
		// reads are answered, and the expiry is told without a cause.
		time.Sleep(term / 4)
		corrupt()
		time.Sleep(2 * time.Second)
		set(1, "a", expiry)
		time.Sleep(time.Until(expiry) + 2*time.Second)
		check("the term ended after the record was readable again", false)

		// Corrupt when the term ends.
		expiry = time.Now().Add(term)
		set(2, "a", expiry)
		time.Sleep(watchBackoffCap)
		corrupt()
		time.Sleep(time.Until(expiry) + 2*time.Second)
		check("the term ended while the record was corrupt", true)

		// A record that turns corrupt once no leader is known.
		set(10, "b", time.Now().Add(-time.Second))
		time.Sleep(watchBackoffCap)
		check("after an expired record was read", false)
		corrupt()
		time.Sleep(2 * time.Second)
		check("the record turned corrupt with no leader known", true)

		set(20, "c", time.Now().Add(time.Hour))
		time.Sleep(watchBackoffCap)
		synctest.Wait()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if s := rec.states[len(rec.states)-1]; len(s.Addresses) != 1 || s.Addresses[0].Addr != "c:443" {
			t.Errorf("a good record again: gRPC's last state is %+v; want c:443", s)
		}
	})
}

// failingPush is a store whose reads work and whose push channel fails.
type failingPush struct{ polling }

func (*failingPush) WaitForChange(context.Context, entry.LeaderToken) (*entry.RaceEntry, error) {
	return nil, errors.New("LISTEN: permission denied")
}

// A push channel that fails is not a record that cannot be read: the reads
// the watcher falls back on are answered, and the error gRPC gets when the
// term ends says nothing of the channel.
func TestResolverPushFailureIsNotAReadFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const term = 10 * time.Second
		p := &failingPush{polling{d: memory.NewDecider()}}
		put(t, p, "a", true, time.Now().Add(term), nil)
		rec, r := build(t, leaderelection.WatchConfig{Decider: p, MaxClockSkew: time.Second})
		defer r.Close()
		time.Sleep(term + 2*time.Second)
		synctest.Wait()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if err := rec.errs[len(rec.errs)-1]; !errors.Is(err, legrpc.ErrNoLeader) || strings.Contains(err.Error(), "LISTEN") {
			t.Errorf("the term ended, the record read fine: gRPC's last error is %v; want ErrNoLeader, without the push channel's error", err)
		}
	})
}

// failableReads is a pushing store whose reads fail while fail is set.
type failableReads struct {
	*memory.Decider
	fail atomic.Bool
}

func (f *failableReads) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if f.fail.Load() {
		return nil, errors.New("read: connection reset")
	}
	return f.Decider.ReadCurrent(ctx)
}

// A change pushed by the store is an answer: the cause of a read that
// failed before it does not ride on the error gRPC gets for it.
func TestResolverPushedChangeClearsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &failableReads{Decider: memory.NewDecider()}
		put(t, f, "a", true, time.Now().Add(time.Hour), nil)
		rec, r := build(t, leaderelection.WatchConfig{Decider: f, MaxClockSkew: time.Second, PollInterval: time.Second})
		defer r.Close()
		synctest.Wait()
		f.fail.Store(true)
		r.ResolveNow(resolver.ResolveNowOptions{}) // a read of the resolver's own, which fails
		// Less than a PollInterval: the watcher's first wait on the
		// channel, which has yet to vouch for one, ends at 1 s with a
		// read, which must find the store answering again.
		time.Sleep(time.Second / 2)
		f.fail.Store(false)
		put(t, f, "a", false, time.Now(), func(e *entry.RaceEntry) { e.Released = true })
		synctest.Wait()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if err := rec.errs[len(rec.errs)-1]; !errors.Is(err, legrpc.ErrNoLeader) || strings.Contains(err.Error(), "connection reset") {
			t.Errorf("after a pushed release: gRPC's last error is %v; want ErrNoLeader without the earlier read's failure", err)
		}
	})
}
