package gcs_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"cloud.google.com/go/storage"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/gcs"
)

// Runs one candidate of an election kept in gs://my-bucket/elections/reports.
// Run the same program on several hosts: one of them leads at a time, and
// another takes over within TermLength + MaxClockSkew if it dies, or at once
// if it stops cleanly.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// Application Default Credentials; they need storage.objects.get,
	// storage.objects.create and storage.objects.delete on the bucket.
	client, err := storage.NewClient(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	decider, err := gcs.NewDecider(client, "my-bucket", "elections/reports")
	if err != nil {
		log.Fatal(err)
	}

	host, _ := os.Hostname()
	cfg := leaderelection.Config{
		Decider: decider,
		// Unique per process incarnation, not per host.
		LeaderID:     fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:8]),
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
				// Check right before acting, and pass the fencing token
				// on so that downstream systems can refuse a deposed leader.
				if !tv.ValueInFuture() {
					return
				}
				log.Printf("sending reports as leader of term %d", tv.Term())
			}
		},
	}
	if err := cfg.Acquire(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}
