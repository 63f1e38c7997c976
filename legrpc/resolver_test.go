package legrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vimeo/go-clocks/fake"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
	"github.com/racedecider/leaderelection/legrpc"
	"github.com/racedecider/leaderelection/memory"
)

// The tests in this file drive the resolver alone, in virtual time, through
// a recorder of what it hands gRPC; the end-to-end tests use real clients.

// recorder is the resolver.ClientConn gRPC would give the resolver, reduced
// to recording what the resolver hands it.
type recorder struct {
	resolver.ClientConn // methods the resolver must not call panic
	mu                  sync.Mutex
	states              []resolver.State
	errs                []error
}

func (r *recorder) UpdateState(s resolver.State) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
	return nil
}

func (r *recorder) ReportError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// ParseServiceConfig accepts any JSON object; a Config can only be made by
// gRPC itself, so a valid one is recorded as a result with neither.
func (r *recorder) ParseServiceConfig(js string) *serviceconfig.ParseResult {
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return &serviceconfig.ParseResult{Err: err}
	}
	return &serviceconfig.ParseResult{}
}

// last returns the last state handed over, how many there were, and the last
// error reported.
func (r *recorder) last() (resolver.State, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s resolver.State
	var err error
	if len(r.states) > 0 {
		s = r.states[len(r.states)-1]
	}
	if len(r.errs) > 0 {
		err = r.errs[len(r.errs)-1]
	}
	return s, len(r.states), err
}

func (r *recorder) addrs() []string {
	s, _, _ := r.last()
	var out []string
	for _, a := range s.Addresses {
		out = append(out, a.Addr)
	}
	return out
}

// polling hides the memory store's pushes, so that watchers poll it as they
// would an object store, and counts reads.
type polling struct {
	d     *memory.Decider
	reads atomic.Int64
}

func (p *polling) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	p.reads.Add(1)
	return p.d.ReadCurrent(ctx)
}

func (p *polling) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	return p.d.WriteEntry(ctx, e)
}

// put writes the next record, as leader id, with the given expiry.
func put(t *testing.T, d leaderelection.RaceDecider, id string, newTerm bool, expiry time.Time, mod func(e *entry.RaceEntry)) {
	t.Helper()
	cur, err := d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e := &entry.RaceEntry{
		ElectionNumber: cur.ElectionNumber + 1,
		Term:           cur.Term,
		LeaderID:       id,
		HostPort:       []string{id + ":443"},
		TermExpiry:     expiry,
		WriteID:        fmt.Sprintf("w%d", cur.ElectionNumber+1),
		Token:          cur.Token,
	}
	if newTerm {
		e.Term = e.ElectionNumber
	}
	if mod != nil {
		mod(e)
	}
	if _, err := d.WriteEntry(t.Context(), e); err != nil {
		t.Fatal(err)
	}
}

func build(t *testing.T, cfg leaderelection.WatchConfig) (*recorder, resolver.Resolver) {
	t.Helper()
	return buildWith(t, legrpc.NewBuilder(cfg))
}

func buildWith(t *testing.T, b *legrpc.Builder) (*recorder, resolver.Resolver) {
	t.Helper()
	rec := &recorder{}
	target := resolver.Target{}
	target.URL.Scheme, target.URL.Path = legrpc.Scheme, "/e"
	r, err := b.Build(target, rec, resolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rec, r
}

// TestResolveNowReadsAPollingStore checks that on a store that cannot push,
// ResolveNow finds a new leader before the watcher's next poll, and that a
// storm of ResolveNow calls costs at most one read per PollInterval / 4.
func TestResolveNowReadsAPollingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = 8 * time.Second
		p := &polling{d: memory.NewDecider()}
		put(t, p, "a", true, time.Now().Add(time.Hour), nil)
		// The watcher polls a whole PollInterval after its last read
		// (the legacy schedule), not on a grid of its own that may fall
		// anywhere in the first interval: the test needs to know that no
		// poll comes within its first seconds.
		b := legrpc.NewBuilder(leaderelection.WatchConfig{Decider: p, MaxClockSkew: time.Second, PollInterval: poll})
		hooks.ResolverContext(b, hooks.WithLegacyScheduling(context.Background()))
		rec, r := buildWith(t, b)
		defer r.Close()
		synctest.Wait()
		if got := rec.addrs(); len(got) != 1 || got[0] != "a:443" {
			t.Fatalf("resolved %q, want a:443", got)
		}

		time.Sleep(time.Second)
		put(t, p, "b", true, time.Now().Add(time.Hour), nil)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := rec.addrs(); got[0] != "a:443" {
			t.Fatalf("resolved %q before any poll or ResolveNow: the test is wrong", got)
		}
		r.ResolveNow(resolver.ResolveNowOptions{})
		synctest.Wait()
		if got := rec.addrs(); got[0] != "b:443" {
			t.Errorf("after ResolveNow resolved %q, want b:443 at once", got)
		}

		p.reads.Store(0)
		for range 100 {
			r.ResolveNow(resolver.ResolveNowOptions{})
			time.Sleep(poll / 10)
		}
		synctest.Wait()
		// 10 polls' worth of ResolveNow storm: 4 reads per poll interval
		// for ResolveNow, plus the watcher's own polls.
		if n := p.reads.Load(); n > 4*10+10+3 {
			t.Errorf("%d reads during a ResolveNow storm lasting 10 poll intervals, want at most about 50", n)
		}
		t.Logf("%d reads during a ResolveNow storm lasting 10 poll intervals", p.reads.Load())
	})
}

// TestResolverStates walks an election through its life on a store that
// pushes, and checks what the resolver hands gRPC at each step.
func TestResolverStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		rec, r := build(t, leaderelection.WatchConfig{Decider: mem, MaxClockSkew: time.Second})
		defer r.Close()
		synctest.Wait()
		_, n, err := rec.last()
		if n != 0 || !errors.Is(err, legrpc.ErrNoLeader) || !strings.Contains(err.Error(), "nobody has been elected") {
			t.Fatalf("empty election: %d states, error %v; want none and ErrNoLeader", n, err)
		}

		// Elected, with a service config.
		cfg := []byte(legrpc.DefaultServiceConfig)
		put(t, mem, "a", true, time.Now().Add(10*time.Second), func(e *entry.RaceEntry) { e.ConnectionParams = cfg })
		synctest.Wait()
		s, n, _ := rec.last()
		if n != 1 || len(s.Addresses) != 1 || s.Addresses[0].Addr != "a:443" || s.ServiceConfig == nil ||
			len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 {
			t.Fatalf("after election: %d states, last %+v; want one with a:443 and a service config", n, s)
		}

		// Extensions change nothing a client uses.
		for range 3 {
			time.Sleep(5 * time.Second)
			put(t, mem, "a", false, time.Now().Add(10*time.Second), func(e *entry.RaceEntry) { e.ConnectionParams = cfg })
		}
		synctest.Wait()
		if _, n, _ := rec.last(); n != 1 {
			t.Errorf("%d states after 3 extensions, want still 1", n)
		}

		// The term runs out: no addresses, and the cause.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		s, n, err = rec.last()
		if n != 2 || len(s.Addresses) != 0 || !errors.Is(err, legrpc.ErrNoLeader) || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("after expiry: %d states, last %+v, error %v; want zero addresses and ErrNoLeader", n, s, err)
		}

		// A new leader whose service config does not parse: its address,
		// and no config (gRPC keeps the one it has).
		put(t, mem, "b", true, time.Now().Add(10*time.Second), func(e *entry.RaceEntry) { e.ConnectionParams = []byte("{not json") })
		synctest.Wait()
		s, n, _ = rec.last()
		if n != 3 || len(s.Addresses) != 1 || s.Addresses[0].Addr != "b:443" || s.ServiceConfig != nil {
			t.Fatalf("after b's election: %d states, last %+v; want b:443 and no service config", n, s)
		}

		// Released.
		put(t, mem, "b", false, time.Now(), func(e *entry.RaceEntry) { e.Released = true })
		synctest.Wait()
		s, n, err = rec.last()
		if n != 4 || len(s.Addresses) != 0 || !strings.Contains(fmt.Sprint(err), "released") {
			t.Fatalf("after release: %d states, last %+v, error %v; want zero addresses and ErrNoLeader", n, s, err)
		}

		// A leader with no address is no leader to a client.
		put(t, mem, "c", true, time.Now().Add(10*time.Second), func(e *entry.RaceEntry) { e.HostPort = nil })
		synctest.Wait()
		_, n, err = rec.last()
		if n != 4 || !strings.Contains(fmt.Sprint(err), "publishes no address") {
			t.Fatalf("leader without address: %d states, error %v", n, err)
		}

		// The record is deleted and written again, numbered from the
		// creator's clock as the engine numbers a record it creates: the
		// watcher reports it, the resolver follows.
		now := time.Now().UnixMicro()
		raw, err := entry.Marshal(&entry.RaceEntry{ElectionNumber: now, Term: now, LeaderID: "d", HostPort: []string{"d:443"},
			TermExpiry: time.Now().Add(10 * time.Second), WriteID: "w-restart"})
		if err != nil {
			t.Fatal(err)
		}
		mem.SetRaw(raw)
		synctest.Wait()
		if got := rec.addrs(); len(got) != 1 || got[0] != "d:443" {
			t.Fatalf("after the record was recreated: resolved %q, want d:443", got)
		}
	})
}

// TestResolverStartsAfterExpiry starts a resolver on the record of a leader
// that crashed before it started: it must not route to it.
func TestResolverStartsAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &polling{d: memory.NewDecider()}
		put(t, p, "a", true, time.Now().Add(-time.Second), nil)
		rec, r := build(t, leaderelection.WatchConfig{Decider: p, MaxClockSkew: time.Second})
		defer r.Close()
		synctest.Wait()
		s, _, err := rec.last()
		if len(s.Addresses) != 0 || !errors.Is(err, legrpc.ErrNoLeader) {
			t.Fatalf("resolved %+v, error %v; want no address and ErrNoLeader", s, err)
		}
	})
}

func TestBuildErrors(t *testing.T) {
	target := resolver.Target{}
	target.URL.Scheme, target.URL.Path = legrpc.Scheme, "/missing"
	_, err := legrpc.NewBuilder(leaderelection.WatchConfig{}).Build(target, &recorder{}, resolver.BuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "Decider") {
		t.Errorf("Build with an invalid WatchConfig: %v", err)
	}
	b := legrpc.NewBuilderFunc(func(name string) (leaderelection.WatchConfig, error) {
		return leaderelection.WatchConfig{}, fmt.Errorf("no election %q", name)
	})
	if _, err := b.Build(target, &recorder{}, resolver.BuildOptions{}); err == nil || !strings.Contains(err.Error(), `no election "missing"`) {
		t.Errorf("Build with a failing lookup: %v", err)
	}
	if b.Scheme() != "leaderelection" {
		t.Errorf("Scheme() = %q", b.Scheme())
	}
}

// resolverGoroutines returns the stacks of goroutines running the resolver's
// code (not the Guard's, which runs on the candidates' goroutines).
func resolverGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "legrpc.(*electionResolver)") || strings.Contains(g, "legrpc.(*Builder)") {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseStopsEveryGoroutine dials a leader, on a store that pushes and on
// one that is polled, and checks that closing the client leaves no goroutine
// of the resolver running: grpc.ClientConn.Close waits for the resolver's
// Close, which waits for every goroutine it started.
func TestCloseStopsEveryGoroutine(t *testing.T) {
	for _, push := range []bool{true, false} {
		t.Run(fmt.Sprintf("push=%v", push), func(t *testing.T) {
			mem := memory.NewDecider()
			var watched leaderelection.RaceDecider = mem
			if !push {
				watched = &polling{d: mem}
			}
			c := newCluster(t, mem, 1)
			leader := c.mon.Next(patience)
			conn, err := grpc.NewClient(legrpc.Scheme+":///e",
				grpc.WithResolvers(legrpc.NewBuilder(watchConfig(watched))),
				grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), patience)
			defer cancel()
			if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
				t.Fatalf("call to %s: %v", leader.ID, err)
			}
			if len(resolverGoroutines()) == 0 {
				t.Fatal("no resolver goroutine found while connected: the check cannot see them")
			}
			if err := conn.Close(); err != nil {
				t.Fatal(err)
			}
			if gs := resolverGoroutines(); len(gs) > 0 {
				t.Errorf("%d goroutines of legrpc still running after Close:\n%s", len(gs), strings.Join(gs, "\n\n"))
			}
		})
	}
}

// A deleted record leaves nobody to route to, and the next record written
// is followed. (Found by the simulation, seed 31: the resolver kept routing
// to the deleted record's leader.)
func TestResolverFollowsDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		put(t, mem, "a", true, time.Now().Add(time.Hour), nil)
		rec, r := build(t, leaderelection.WatchConfig{Decider: mem, MaxClockSkew: time.Second})
		defer r.Close()
		synctest.Wait()
		if got := rec.addrs(); len(got) != 1 || got[0] != "a:443" {
			t.Fatalf("resolved %q, want a:443", got)
		}
		mem.Delete()
		time.Sleep(time.Second) // Watch confirms an absence within half a PollInterval
		synctest.Wait()
		if s, _, err := rec.last(); len(s.Addresses) != 0 || !errors.Is(err, legrpc.ErrNoLeader) || !strings.Contains(err.Error(), "deleted") {
			t.Fatalf("after the deletion: %+v, error %v; want no address and ErrNoLeader naming the deletion", s, err)
		}
		now := time.Now().UnixMicro()
		raw, err := entry.Marshal(&entry.RaceEntry{ElectionNumber: now, Term: now, LeaderID: "b", HostPort: []string{"b:443"},
			TermExpiry: time.Now().Add(time.Hour), WriteID: "w-new"})
		if err != nil {
			t.Fatal(err)
		}
		mem.SetRaw(raw)
		synctest.Wait()
		if got := rec.addrs(); len(got) != 1 || got[0] != "b:443" {
			t.Fatalf("after the record was written again: resolved %q, want b:443", got)
		}
	})
}

// A leader learnt from the resolver's own read (ResolveNow on a polled
// store), before its watcher has seen it, is dropped at its expiry, not at
// the watcher's next poll. (Found by the simulation, seed 343.)
func TestResolverEndsOwnReadAtExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = time.Minute
		p := &polling{d: memory.NewDecider()}
		put(t, p, "a", true, time.Now().Add(time.Hour), nil)
		rec, r := build(t, leaderelection.WatchConfig{Decider: p, MaxClockSkew: time.Second, PollInterval: poll})
		defer r.Close()
		synctest.Wait()
		put(t, p, "b", true, time.Now().Add(20*time.Second), nil)
		r.ResolveNow(resolver.ResolveNowOptions{})
		time.Sleep(poll/4 + time.Second) // the resolver's own read is spaced poll/4 after the last
		if got := rec.addrs(); len(got) != 1 || got[0] != "b:443" {
			t.Fatalf("after ResolveNow: resolved %q, want b:443", got)
		}
		time.Sleep(5 * time.Second) // b's term has ended; the watcher reads at 1 min
		synctest.Wait()
		if s, _, err := rec.last(); len(s.Addresses) != 0 || !errors.Is(err, legrpc.ErrNoLeader) {
			t.Fatalf("after b's expiry: %+v, error %v; want no address", s, err)
		}
	})
}

// refusing refuses every read while refuse is set, as a store does until a
// permission reaches the pod (RBAC propagating after it starts), around a
// real memory store that it polls.
type refusing struct {
	polling
	refuse atomic.Bool
}

func (f *refusing) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if f.refuse.Load() {
		return nil, fmt.Errorf("test store: 403 permission denied: %w", entry.ErrRefused)
	}
	return f.polling.ReadCurrent(ctx)
}

// A refusal stops the watcher (Watch returns ErrRefused), but not the
// resolver: it tells gRPC and OnError, and follows the election again once
// the store answers. (It used to stop following for good, silently.)
func TestResolverFollowsAgainAfterRefusal(t *testing.T) {
	const poll = time.Second
	clk := fake.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store := &refusing{polling: polling{d: memory.NewDecider()}}
	put(t, store.d, "a", true, clk.Now().Add(time.Hour), nil)
	onError := make(chan error, 100)
	rec, r := build(t, leaderelection.WatchConfig{Decider: store, MaxClockSkew: time.Second, PollInterval: poll, Clock: clk,
		OnError: func(_ context.Context, err error) { onError <- err }})
	defer r.Close()
	clk.AwaitSleepers(2) // the watcher polling, refresh spacing its reads
	if got := rec.addrs(); len(got) != 1 || got[0] != "a:443" {
		t.Fatalf("resolved %q, want a:443", got)
	}

	// Refused from the watcher's next poll on; meanwhile b is elected.
	store.refuse.Store(true)
	put(t, store.d, "b", true, clk.Now().Add(time.Hour), nil)
	clk.Advance(poll)
	select {
	case err := <-onError:
		if !errors.Is(err, leaderelection.ErrRefused) {
			t.Fatalf("OnError told of %v, want the refusal", err)
		}
	case <-time.After(patience):
		t.Fatal("the refusal was not reported to OnError")
	}
	if _, _, err := rec.last(); !errors.Is(err, leaderelection.ErrRefused) || !strings.Contains(err.Error(), "403 permission denied") ||
		!strings.Contains(err.Error(), `"e"`) {
		t.Fatalf("gRPC was told %v, want the refusal, naming the election", err)
	}

	// Still refused at the first retry: reported again.
	clk.AwaitSleepers(1)
	clk.Advance(poll)
	if err := <-onError; !errors.Is(err, leaderelection.ErrRefused) {
		t.Fatalf("OnError told of %v, want the refusal", err)
	}

	// The permission arrives: within the next (doubled) backoff the
	// resolver reads the record and watches again.
	store.refuse.Store(false)
	clk.AwaitSleepers(1)
	clk.Advance(2 * poll)
	clk.AwaitSleepers(1) // the watcher polling again
	if got := rec.addrs(); len(got) != 1 || got[0] != "b:443" {
		t.Fatalf("after the refusal ended: resolved %q, want b:443", got)
	}
	select {
	case err := <-onError:
		t.Errorf("OnError told of %v after the refusal ended", err)
	default:
	}
}

// A term that runs out while the store refuses is reported with the
// refusal; once the store answers, the same state is handed to gRPC again
// without it, rather than leaving calls failing with a refusal long over.
func TestResolverDropsTheRefusalOnceAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &refusing{polling: polling{d: memory.NewDecider()}}
		expiry := time.Now().Add(3 * time.Second)
		put(t, store.d, "a", true, expiry, nil)
		rec, r := build(t, leaderelection.WatchConfig{Decider: store, MaxClockSkew: time.Second, PollInterval: time.Second})
		defer r.Close()
		synctest.Wait()
		if got := rec.addrs(); len(got) != 1 || got[0] != "a:443" {
			t.Fatalf("resolved %q, want a:443", got)
		}
		store.refuse.Store(true)
		// a's term runs out while reads are refused; the store answers
		// again right after.
		time.Sleep(time.Until(expiry) + time.Millisecond)
		synctest.Wait()
		if _, _, err := rec.last(); !errors.Is(err, legrpc.ErrNoLeader) || !errors.Is(err, leaderelection.ErrRefused) {
			t.Fatalf("after the term ran out, refused: gRPC was told %v; want ErrNoLeader with the refusal", err)
		}
		store.refuse.Store(false)
		time.Sleep(2 * time.Minute) // the retries back off up to a minute
		synctest.Wait()
		if _, _, err := rec.last(); !errors.Is(err, legrpc.ErrNoLeader) || errors.Is(err, leaderelection.ErrRefused) ||
			!strings.Contains(err.Error(), "expired") {
			t.Fatalf("once the store answers gRPC is told %v; want ErrNoLeader (expired) without the refusal", err)
		}
	})
}

// A failed first read on a store that pushes is retried until one succeeds:
// with nobody elected the watcher reports nothing, and clients must not be
// left with the failed read's error. (It used to be read once.)
func TestResolverRetriesFirstRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &failingFirst{Decider: memory.NewDecider()}
		store.fails.Store(2) // refresh's first read and the watcher's
		rec, r := build(t, leaderelection.WatchConfig{Decider: store, MaxClockSkew: time.Second})
		defer r.Close()
		synctest.Wait()
		if _, _, err := rec.last(); err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("after the failed reads gRPC was told %v, want the read error", err)
		}
		time.Sleep(2 * time.Second) // the retries back off from PollInterval (1 s)
		synctest.Wait()
		if _, _, err := rec.last(); !errors.Is(err, legrpc.ErrNoLeader) || !strings.Contains(err.Error(), "nobody has been elected") {
			t.Fatalf("once the store answers gRPC is told %v, want ErrNoLeader: nobody elected", err)
		}
	})
}

// failingFirst fails its first reads (as many as fails says), and every
// read while down is set, with a transient error, and pushes changes.
type failingFirst struct {
	*memory.Decider
	fails atomic.Int64
	down  atomic.Bool
}

func (f *failingFirst) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if f.fails.Add(-1) >= 0 || f.down.Load() {
		return nil, errors.New("test store: connection reset")
	}
	return f.Decider.ReadCurrent(ctx)
}

// A client started while the store cannot be reached is told the read
// error. Once the store answers again, with nobody elected (so that the
// watcher reports nothing), gRPC is told there is no leader as soon as the
// watcher's read is answered, not at the resolver's own retry, whose backoff
// has grown towards a minute by then. (It kept the stale read error until
// that retry.)
func TestResolverLearnsTheStoreIsBackFromTheWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &failingFirst{Decider: memory.NewDecider()}
		store.down.Store(true)
		// The watcher's Observer sees its reads alone, not the
		// resolver's: answered closes at its first answered one.
		answered := make(chan struct{})
		var once sync.Once
		b := legrpc.NewBuilder(leaderelection.WatchConfig{Decider: store, MaxClockSkew: time.Second,
			Observer: leaderelection.ObserverFunc(func(e leaderelection.Event) {
				if e.Kind == leaderelection.EventStoreRequest && e.Op == leaderelection.OpRead && e.Err == nil {
					once.Do(func() { close(answered) })
				}
			})})
		// Seeded, so that the resolver's retries and the watcher's come
		// at the same moments in every run.
		hooks.ResolverContext(b, hooks.WithRand(context.Background(), rand.New(rand.NewPCG(1, 2))))
		rec, r := buildWith(t, b)
		defer r.Close()
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if _, _, err := rec.last(); err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("after 40 s of failed reads gRPC was told %v, want the read error", err)
		}
		store.down.Store(false)
		up := time.Now()
		<-answered // the watcher retries within a PollInterval (1 s)
		synctest.Wait()
		if _, _, err := rec.last(); !errors.Is(err, legrpc.ErrNoLeader) || !strings.Contains(err.Error(), "nobody has been elected") {
			t.Fatalf("once the watcher's read was answered (%v after the store came back) gRPC was told %v, want ErrNoLeader: nobody elected",
				time.Since(up), err)
		}
	})
}

// hangingReads is a store whose reads hang until their context ends while
// hang is set, as over a connection that stopped answering.
type hangingReads struct {
	*memory.Decider
	hang atomic.Bool
}

func (h *hangingReads) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if h.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.Decider.ReadCurrent(ctx)
}

// TestResolverHungReadIsAbandoned: a read of the resolver's own that gets no
// answer is abandoned after 10 s however long the PollInterval, so that
// once the store answers again clients learn what it holds. It was given the
// whole PollInterval (an hour here), during which gRPC kept the error of the
// watcher's timed-out read.
func TestResolverHungReadIsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &hangingReads{Decider: memory.NewDecider()}
		store.hang.Store(true)
		rec, r := build(t, leaderelection.WatchConfig{Decider: store, MaxClockSkew: time.Second, PollInterval: time.Hour})
		defer r.Close()
		time.Sleep(time.Second)
		store.hang.Store(false) // answering again, from 1 s on
		time.Sleep(14 * time.Second)
		synctest.Wait()
		if _, _, err := rec.last(); !errors.Is(err, legrpc.ErrNoLeader) || !strings.Contains(err.Error(), "nobody has been elected") {
			t.Fatalf("15 s after the start, with the store answering from 1 s, gRPC was told %v; want ErrNoLeader: nobody elected", err)
		}
	})
}

// TestResolverEmptyAddressIsNoAddress: an empty HostPort entry is no way to
// the leader. It used to be handed to gRPC as the address "", and a record
// whose only address was empty as a leader to route to.
func TestResolverEmptyAddressIsNoAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		put(t, mem, "a", true, time.Now().Add(time.Hour), func(e *entry.RaceEntry) { e.HostPort = []string{"", "a:443", ""} })
		rec, r := build(t, leaderelection.WatchConfig{Decider: mem, MaxClockSkew: time.Second})
		defer r.Close()
		synctest.Wait()
		s, _, _ := rec.last()
		if got := rec.addrs(); len(got) != 1 || got[0] != "a:443" || len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 {
			t.Fatalf("resolved %q (state %+v); want a:443 alone", got, s)
		}

		put(t, mem, "b", true, time.Now().Add(time.Hour), func(e *entry.RaceEntry) { e.HostPort = []string{""} })
		synctest.Wait()
		s, _, err := rec.last()
		if len(s.Addresses) != 0 || !errors.Is(err, legrpc.ErrNoLeader) || !strings.Contains(err.Error(), "publishes no address") {
			t.Fatalf("leader with only an empty address: last state %+v, error %v; want no address and ErrNoLeader", s, err)
		}
	})
}
