package dynamodb_test

import (
	"context"
	"crypto/rand"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	leaderelection "github.com/racedecider/leaderelection"
	ledynamodb "github.com/racedecider/leaderelection/dynamodb"
)

// Run an election on a DynamoDB item. The client comes from the usual AWS
// configuration (environment, shared config files, instance role); for
// DynamoDB Local, set its endpoint.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// Only for DynamoDB Local:
		if endpoint := os.Getenv("DYNAMODB_ENDPOINT"); endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	// The table "elections" exists (see CreateTable); the job's item is
	// created by the first election.
	decider, err := ledynamodb.NewDecider(client, "elections", "report-job")
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

// Create the table for elections once, for example in a setup step. In
// production, create it with the rest of your infrastructure instead.
func ExampleCreateTable() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := ledynamodb.CreateTable(ctx, dynamodb.NewFromConfig(cfg), "elections"); err != nil {
		log.Fatal(err)
	}
}

// Open a Decider by URL, as the leaderelect command does: the AWS SDK's
// default configuration (environment, shared files, instance role), the
// table "elections" and the item whose partition key "pk" is "report-job".
// For DynamoDB Local, add &endpoint=http://127.0.0.1:8000.
func Example_url() {
	d, err := leaderelection.OpenDecider(context.Background(), "dynamodb://elections/report-job?region=eu-west-1")
	if err != nil {
		log.Fatal(err)
	}
	_ = d // use as Config.Decider
}

// Keep elections in a table that already exists for other items, keyed on
// "PK" and "SK": each election is the item with PK "elections" and its own
// SK.
func ExampleWithSortKey() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	d, err := ledynamodb.NewDecider(dynamodb.NewFromConfig(cfg), "app-table", "elections",
		ledynamodb.WithKeyAttribute("PK"), ledynamodb.WithSortKey("SK", "report-job"))
	if err != nil {
		log.Fatal(err)
	}
	_ = d // use as Config.Decider
}
