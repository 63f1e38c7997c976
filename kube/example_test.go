package kube_test

import (
	"context"
	"crypto/rand"
	"log"
	"os"
	"os/signal"
	"time"

	"k8s.io/client-go/rest"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/kube"
)

// Run an election on a Lease from inside a Pod, with its service account
// (which a Role must allow get, list, watch, create and update on leases in
// the namespace). Outside a cluster, load a kubeconfig with
// k8s.io/client-go/tools/clientcmd, or open "k8s://NAMESPACE/NAME" with
// leaderelection.OpenDecider.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatal(err)
	}
	decider, err := kube.NewDeciderForConfig(cfg, "my-namespace", "report-job")
	if err != nil {
		log.Fatal(err)
	}
	defer decider.Close()

	pod, _ := os.Hostname()
	candidate := leaderelection.Config{
		Decider:      decider,
		LeaderID:     pod + "/" + rand.Text(), // unique per process; shown as holderIdentity
		TermLength:   leaderelection.DefaultTermLength,
		MaxClockSkew: leaderelection.DefaultMaxClockSkew,
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if !tv.ValueInFuture() {
					return // the term ran out: stop acting at once
				}
				// One unit of leader-only work, fenced with tv.Term().
				log.Printf("leading, term %d", tv.Term())
			}
		},
	}
	// Campaigns until ctx ends; a leader releases its term on the way out.
	if err := candidate.Acquire(ctx); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
