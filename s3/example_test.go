package s3_test

import (
	"context"
	"crypto/rand"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	leaderelection "github.com/racedecider/leaderelection"
	les3 "github.com/racedecider/leaderelection/s3"
)

// Run an election on an S3 object. The client comes from the usual AWS
// configuration (environment, shared config files, instance role); for an
// S3-compatible store, set its endpoint and path-style addressing.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		// Only for an S3-compatible store such as MinIO or versitygw:
		if endpoint := os.Getenv("S3_ENDPOINT"); endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	})
	decider, err := les3.NewDecider(client, "my-bucket", "elections/report-job")
	if err != nil {
		log.Fatal(err)
	}

	host, _ := os.Hostname()
	candidate := leaderelection.Config{
		Decider:      decider,
		LeaderID:     host + "/" + rand.Text(), // unique per process
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
				// One unit of leader-only work; downstream systems get
				// tv.Term() as the fencing token and reject older ones.
				log.Printf("leading, term %d", tv.Term())
			}
		},
	}
	// Campaigns until ctx ends; a leader releases its term on the way out.
	if err := candidate.Acquire(ctx); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
