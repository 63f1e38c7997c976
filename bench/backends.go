package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"google.golang.org/api/option"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/gcs"
	"github.com/racedecider/leaderelection/memory"
	les3 "github.com/racedecider/leaderelection/s3"
)

// The backends the program knows, in the order "all" runs them.
var backendNames = []string{"memory", "memory-poll", "gcs", "s3"}

// backend makes fresh election objects on one store.
type backend struct {
	name string
	// push: the accesses forward the store's change notifications.
	push bool
	// latency is added to every request (half each way).
	latency time.Duration
	// desc describes the store for the report.
	desc string
	rtt  *rttLog
	// newStore returns a RaceDecider on a new, empty election object.
	newStore func(ctx context.Context) (leaderelection.RaceDecider, error)
	close    func()
}

const emulatorBucket = "leaderelection-bench"

func newBackend(ctx context.Context, name string, s *settings) (*backend, error) {
	b := &backend{name: name, latency: s.latency, rtt: &rttLog{}, close: func() {}}
	var seq atomic.Int64
	switch name {
	case "memory", "memory-poll":
		b.push = name == "memory"
		b.desc = fmt.Sprintf("memory.Decider + %v per request", s.latency)
		if !b.push {
			b.desc += ", WaitForChange hidden (polling)"
		}
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) { return memory.NewDecider(), nil }
	case "gcs":
		srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1"})
		if err != nil {
			return nil, fmt.Errorf("starting fake-gcs-server: %w", err)
		}
		srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: emulatorBucket})
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		client, err := storage.NewClient(ctx,
			option.WithEndpoint(srv.URL()+"/storage/v1/"),
			option.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			srv.Stop()
			return nil, fmt.Errorf("storage client for fake-gcs-server: %w", err)
		}
		b.desc = fmt.Sprintf("gcs.Decider on fake-gcs-server (in process, loopback HTTP) + %v per request, polling", s.latency)
		b.close = func() {
			client.Close()
			tr.CloseIdleConnections()
			srv.Stop()
		}
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) {
			return gcs.NewDecider(client, emulatorBucket, fmt.Sprintf("bench/election-%d", seq.Add(1)))
		}
	case "s3":
		mem := s3mem.New()
		if err := mem.CreateBucket(emulatorBucket); err != nil {
			return nil, fmt.Errorf("gofakes3: creating bucket: %w", err)
		}
		srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		client := awss3.New(awss3.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(srv.URL),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider("bench", "bench", ""),
			HTTPClient:   &http.Client{Transport: tr},
			Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxBackoff = 50 * time.Millisecond
				o.RateLimiter = ratelimit.None
			}),
		})
		b.desc = fmt.Sprintf("s3.Decider on gofakes3 + s3mem (in process, loopback HTTP) + %v per request, polling", s.latency)
		b.close = func() {
			tr.CloseIdleConnections()
			srv.Close()
		}
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) {
			return les3.NewDecider(client, emulatorBucket, fmt.Sprintf("bench/election-%d", seq.Add(1)))
		}
	default:
		return nil, fmt.Errorf("unknown backend %q (known: %v)", name, backendNames)
	}
	return b, nil
}
