package legrpc_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/legrpc"
	"github.com/racedecider/leaderelection/memory"
)

// releaseClock records when a release is written.
type releaseClock struct {
	*memory.Decider
	mu         sync.Mutex
	releasedAt time.Time
}

func (r *releaseClock) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	tok, err := r.Decider.WriteEntry(ctx, e)
	if err == nil && e.Released {
		r.mu.Lock()
		r.releasedAt = time.Now()
		r.mu.Unlock()
	}
	return tok, err
}

func (r *releaseClock) released() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.releasedAt
}

// leadingGuard starts, in a synctest bubble, a candidate with a Guard
// attached (10 s term) on a store that notes when it was released, and waits
// until it leads. shutdown cancels its Acquire, whose error comes on
// acquired.
func leadingGuard(t *testing.T) (g *legrpc.Guard, store *releaseClock, shutdown context.CancelFunc, acquired <-chan error) {
	t.Helper()
	g, store = new(legrpc.Guard), &releaseClock{Decider: memory.NewDecider()}
	cfg := g.Attach(leaderelection.Config{Decider: store, LeaderID: "a", TermLength: 10 * time.Second, MaxClockSkew: time.Second})
	ctx, shutdown := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cfg.Acquire(ctx) }()
	synctest.Wait()
	if _, ok := g.Leading(); !ok {
		t.Fatal("not leading")
	}
	return g, store, shutdown, done
}

// A graceful shutdown releases the term only once every call the Guard
// admitted has returned; a call still running when the term ends leaves the
// term to expire instead, so that no successor is elected while it runs.
func TestGuardDrainsAdmittedCallsBeforeRelease(t *testing.T) {
	for _, tc := range []struct {
		name        string
		runsOn      time.Duration // how long the handler runs after its context ends
		wantRelease bool
	}{
		{"call returns within the term", 2 * time.Second, true},
		{"call outlasts the term", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g, store, shutdown, acquired := leadingGuard(t)

				interceptor := g.UnaryServerInterceptor()
				admitted, handlerDone := make(chan struct{}), make(chan time.Time, 1)
				go func() {
					_, err := interceptor(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/svc/Work"},
						func(hctx context.Context, _ any) (any, error) {
							close(admitted)
							<-hctx.Done() // the leadership is ending: wind down
							time.Sleep(tc.runsOn)
							handlerDone <- time.Now()
							return nil, nil
						})
					if err != nil && !errors.Is(err, context.Canceled) {
						t.Logf("call ended with %v", err)
					}
				}()
				<-admitted
				shutdown()
				done := <-handlerDone
				if err := <-acquired; !errors.Is(err, context.Canceled) {
					t.Errorf("Acquire returned %v", err)
				}
				rec, _ := store.ReadCurrent(t.Context())
				switch rel := store.released(); {
				case tc.wantRelease && (rel.IsZero() || rel.Before(done)):
					t.Errorf("released at %v, before the admitted call returned at %v", rel, done)
				case !tc.wantRelease && (!rel.IsZero() || rec.Released):
					t.Errorf("released at %v although the admitted call ran past the term (until %v)", rel, done)
				}
			})
		})
	}
}

// panicStream is the server stream of a streaming call, reduced to its
// context.
type panicStream struct {
	grpc.ServerStream // methods the Guard must not call panic
	ctx               context.Context
}

func (s panicStream) Context() context.Context { return s.ctx }

// A handler that panics, under a recovery interceptor chained outside the
// Guard, still leaves the tenure: a shutdown then releases the term at once.
// (The admitted call used to be counted for good, so that the drain kept the
// term, rejecting every call, until it expired unreleased.)
func TestGuardLeavesTenureWhenHandlerPanics(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g, store, shutdown, acquired := leadingGuard(t)

				// The recovery interceptor, outside the Guard.
				recovered := func(call func() error) (err error) {
					defer func() {
						if p := recover(); p != nil {
							err = status.Errorf(codes.Internal, "panic: %v", p)
						}
					}()
					return call()
				}
				var err error
				if stream {
					guarded := g.StreamServerInterceptor()
					err = recovered(func() error {
						return guarded(nil, panicStream{ctx: t.Context()}, &grpc.StreamServerInfo{FullMethod: "/svc/Watch"},
							func(any, grpc.ServerStream) error { panic("handler bug") })
					})
				} else {
					guarded := g.UnaryServerInterceptor()
					err = recovered(func() error {
						_, err := guarded(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/svc/Work"},
							func(context.Context, any) (any, error) { panic("handler bug") })
						return err
					})
				}
				if status.Code(err) != codes.Internal {
					t.Fatalf("the panicking call returned %v, want the recovery's Internal", err)
				}

				stopped := time.Now()
				shutdown()
				if err := <-acquired; !errors.Is(err, context.Canceled) {
					t.Errorf("Acquire returned %v", err)
				}
				rec, err := store.ReadCurrent(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if rel := store.released(); !rec.Released || rel.Sub(stopped) > time.Second {
					t.Errorf("released %v at %v, shutdown at %v; want a release at once", rec.Released, rel, stopped)
				}
			})
		})
	}
}
