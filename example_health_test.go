package leaderelection_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/memory"
)

// A HealthCheck observes the election and serves as a liveness probe: it
// fails when this process believes it leads but its term ran out (OnElected
// ignores its context, or the process is starved), or when the store has not
// answered for MaxQuiet. Serve it on the path the Kubernetes livenessProbe
// requests (httpGet: {path: /healthz, port: 8080}); never as a readiness
// probe that fails on followers.
func ExampleHealthCheck() {
	health := &leaderelection.HealthCheck{Tolerance: 10 * time.Second, MaxQuiet: time.Minute}
	mux := http.NewServeMux()
	mux.Handle("/healthz", health) // http.ListenAndServe(":8080", mux) in production

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	_ = leaderelection.Config{
		Decider:      memory.NewDecider(),
		LeaderID:     "worker-1",
		TermLength:   2 * time.Second,
		MaxClockSkew: 200 * time.Millisecond,
		Observer:     health, // or leaderelection.Observers(health, metrics)
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			probe := httptest.NewRecorder()
			mux.ServeHTTP(probe, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			fmt.Print("leading: ", probe.Code, " ", probe.Body.String())
			stop()
			<-ctx.Done()
		},
	}.Acquire(ctx)
	fmt.Println("after stepping down:", health.Check())
	// Output:
	// leading: 200 ok
	// after stepping down: <nil>
}

// An Observer sees every event of the election; here, a tenure's beginning
// and end, and the bound on this host's clock offset to the store's.
func ExampleObserver() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var offset leaderelection.ClockOffset
	log := leaderelection.ObserverFunc(func(e leaderelection.Event) {
		switch e.Kind {
		case leaderelection.EventElected:
			fmt.Println("elected:", e.LeaderID)
		case leaderelection.EventOusted:
			fmt.Println("ousted:", e.Reason)
		case leaderelection.EventClockOffset:
			offset = e.Offset
		}
	})
	_ = leaderelection.Config{
		Decider:      memory.NewDecider(),
		LeaderID:     "worker-1",
		TermLength:   2 * time.Second,
		MaxClockSkew: 200 * time.Millisecond,
		Observer:     log,
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			stop()
			<-ctx.Done()
		},
	}.Acquire(ctx)
	// The memory store commits on this host's clock: the offset is within
	// the write's round trip of zero.
	fmt.Println("offset known:", offset.Known(), "- at least:", offset.AtLeast())
	// Output:
	// elected: worker-1
	// ousted: shutdown
	// offset known: true - at least: 0s
}
