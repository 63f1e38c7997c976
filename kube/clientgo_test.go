package kube_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cgle "k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/faultproxy"
)

// beliefs is a shared monitor of who believes it leads: client-go electors
// from OnStartedLeading until they stop (their context ends, or the test
// stops them), ours while OnElected runs and its TimeView is valid. Every
// beginning checks that nobody else believes it leads, and a sampler checks
// the same every millisecond.
type beliefs struct {
	t       *testing.T
	mu      sync.Mutex
	cg      map[string]bool
	ours    map[string]*leaderelection.TimeView
	history []string // "kind:id" of each tenure, in order
	elected chan string
}

func newBeliefs(t *testing.T) *beliefs {
	b := &beliefs{t: t, cg: map[string]bool{}, ours: map[string]*leaderelection.TimeView{}, elected: make(chan string, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				b.mu.Lock()
				if ls := b.leadersLocked(); len(ls) > 1 {
					t.Errorf("sampled two leaders at once: %v", ls)
				}
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

func (b *beliefs) leadersLocked() []string {
	var ls []string
	for id, on := range b.cg {
		if on {
			ls = append(ls, "client-go:"+id)
		}
	}
	for id, tv := range b.ours {
		if tv.ValueInFuture() {
			ls = append(ls, "ours:"+id)
		}
	}
	sort.Strings(ls)
	return ls
}

func (b *beliefs) begin(who string) {
	if ls := b.leadersLocked(); len(ls) > 0 {
		b.t.Errorf("%s elected while %v believe they lead", who, ls)
	}
	b.history = append(b.history, who)
	b.elected <- who
}

func (b *beliefs) beginClientGo(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.begin("client-go:" + id)
	b.cg[id] = true
}

func (b *beliefs) endClientGo(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cg[id] = false
}

func (b *beliefs) onElected(id string) func(ctx context.Context, tv *leaderelection.TimeView) {
	return func(ctx context.Context, tv *leaderelection.TimeView) {
		b.mu.Lock()
		b.begin("ours:" + id)
		b.ours[id] = tv
		b.mu.Unlock()
		<-ctx.Done()
		b.mu.Lock()
		delete(b.ours, id)
		b.mu.Unlock()
	}
}

// next waits for the next election and returns who won.
func (b *beliefs) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case who := <-b.elected:
		t.Logf("elected: %s", who)
		return who
	case <-time.After(within):
		t.Fatalf("nobody elected within %v", within)
		return ""
	}
}

// clientGoElector is one k8s.io/client-go/tools/leaderelection elector on
// a LeaseLock.
type clientGoElector struct {
	id     string
	b      *beliefs
	cancel context.CancelFunc
	done   chan struct{}
}

// client-go timing: LeaseDuration > 2 x RenewDeadline + RetryPeriod (see
// the README: the renewal that succeeded may itself take RenewDeadline).
const (
	cgLeaseDuration = 5 * time.Second
	cgRenewDeadline = 2 * time.Second
	cgRetryPeriod   = 500 * time.Millisecond
)

func startClientGo(t *testing.T, b *beliefs, cs kubernetes.Interface, name, id string, releaseOnCancel bool) *clientGoElector {
	t.Helper()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: namespace},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	e := &clientGoElector{id: id, b: b, done: make(chan struct{})}
	le, err := cgle.NewLeaderElector(cgle.LeaderElectionConfig{
		Lock:            lock,
		Name:            name,
		LeaseDuration:   cgLeaseDuration,
		RenewDeadline:   cgRenewDeadline,
		RetryPeriod:     cgRetryPeriod,
		ReleaseOnCancel: releaseOnCancel,
		Callbacks: cgle.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				b.beginClientGo(id)
				<-ctx.Done()
				b.endClientGo(id)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, e.cancel = context.WithCancel(t.Context())
	go func() {
		defer close(e.done)
		le.Run(ctx)
	}()
	return e
}

// stop ends the elector as a process shutting down does: it stops its work
// (the belief ends), then cancels the election, which releases the Lease
// when ReleaseOnCancel is set and otherwise leaves it to expire.
func (e *clientGoElector) stop() {
	e.b.endClientGo(e.id)
	e.cancel()
	<-e.done
}

type ourCandidate struct {
	id     string
	cancel context.CancelFunc
	done   chan error
	proxy  *faultproxy.Proxy
}

const (
	ourTerm = 2 * time.Second
	ourSkew = 250 * time.Millisecond
)

func startOurs(t *testing.T, b *beliefs, name, id string) *ourCandidate {
	t.Helper()
	cfg := adminConfig(t)
	p := faultproxy.Start(t, serverAddr(t, cfg))
	d := newDecider(t, viaAddr(t, cfg, p.Addr()), name)
	c := &ourCandidate{id: id, done: make(chan error, 1), proxy: p}
	var ctx context.Context
	ctx, c.cancel = context.WithCancel(t.Context())
	go func() {
		c.done <- leaderelection.Config{
			Decider:      d,
			LeaderID:     id,
			TermLength:   ourTerm,
			MaxClockSkew: ourSkew,
			OnElected:    b.onElected(id),
		}.Acquire(ctx)
	}()
	return c
}

func (c *ourCandidate) stop(t *testing.T) {
	c.cancel()
	if err := <-c.done; !errors.Is(err, context.Canceled) {
		t.Errorf("%s: Acquire returned %v, want context.Canceled", c.id, err)
	}
}

// hold lets the election run for d: leaders extend, candidates wait, and the
// monitor watches.
func hold(t *testing.T, d time.Duration) {
	select {
	case <-t.Context().Done():
	case <-time.After(d):
	}
}

// TestClientGoCoexistence runs client-go electors and ours on one Lease, as
// during a rolling migration, through hand-overs in both directions, both
// graceful (release) and not (a client-go elector that stops without
// releasing, one of ours whose access is cut), and checks that leadership
// never overlaps.
func TestClientGoCoexistence(t *testing.T) {
	cfg := adminConfig(t)
	cs := clientset(t, cfg)
	name := freshLease()
	b := newBeliefs(t)
	patience := 3 * (cgLeaseDuration + ourTerm)

	// A client-go elector leads; two of ours wait and must not take over
	// while it renews.
	cg1 := startClientGo(t, b, cs, name, "cg-1", true)
	if who := b.next(t, patience); who != "client-go:cg-1" {
		t.Fatalf("first leader %s, want client-go:cg-1", who)
	}
	o1 := startOurs(t, b, name, "ours-1")
	o2 := startOurs(t, b, name, "ours-2")
	hold(t, 2*cgLeaseDuration)

	// It stops and releases: one of ours takes over, after the second
	// client-go writes with its release, plus MaxClockSkew.
	cg1.stop()
	first := b.next(t, patience)
	if !strings.HasPrefix(first, "ours:") {
		t.Fatalf("after the client-go leader released, %s was elected; want one of ours", first)
	}

	// Client-go electors join and must not take over while ours extend.
	cg2 := startClientGo(t, b, cs, name, "cg-2", false)
	cg3 := startClientGo(t, b, cs, name, "cg-3", false)
	hold(t, 2*cgLeaseDuration)

	// Ours leave, the leader releasing: a client-go elector takes over.
	o1.stop(t)
	o2.stop(t)
	var cgLeader string
	for cgLeader == "" {
		who := b.next(t, patience)
		if id, ok := strings.CutPrefix(who, "client-go:"); ok {
			cgLeader = id
		}
	}

	// Two more of ours join; the client-go leader then stops without
	// releasing (as if it crashed): the Lease must expire before anyone,
	// client-go or ours, takes over.
	o3 := startOurs(t, b, name, "ours-3")
	o4 := startOurs(t, b, name, "ours-4")
	hold(t, cgLeaseDuration)
	leader, other := cg2, cg3
	if cgLeader == "cg-3" {
		leader, other = cg3, cg2
	}
	leader.stop()
	b.next(t, patience)

	// Whoever leads now: make sure one of ours leads, then cut its access
	// (a crash as far as the Lease can tell): the others, client-go
	// included, must wait out its term.
	other.stop()
	var ours string
	for ours == "" {
		b.mu.Lock()
		ls := b.leadersLocked()
		b.mu.Unlock()
		if len(ls) == 1 && strings.HasPrefix(ls[0], "ours:") {
			ours = strings.TrimPrefix(ls[0], "ours:")
			break
		}
		b.next(t, patience)
	}
	cg4 := startClientGo(t, b, cs, name, "cg-4", true)
	hold(t, cgLeaseDuration)
	crashed, survivor := o3, o4
	if ours == "ours-4" {
		crashed, survivor = o4, o3
	}
	crashed.proxy.SetCut(true)
	after := b.next(t, patience)
	t.Logf("after %s lost its access, %s took over", crashed.id, after)
	hold(t, cgLeaseDuration)

	crashed.proxy.SetCut(false)
	cg4.stop()
	survivor.stop(t)
	crashed.stop(t)

	b.mu.Lock()
	defer b.mu.Unlock()
	t.Logf("tenures: %s", strings.Join(b.history, " -> "))
	kinds := map[string]bool{}
	for i := 1; i < len(b.history); i++ {
		from, _, _ := strings.Cut(b.history[i-1], ":")
		to, _, _ := strings.Cut(b.history[i], ":")
		kinds[fmt.Sprintf("%s->%s", from, to)] = true
	}
	for _, want := range []string{"client-go->ours", "ours->client-go"} {
		if !kinds[want] {
			t.Errorf("no hand-over %s among %v", want, slices.Sorted(maps.Keys(kinds)))
		}
	}
}
