package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/memory"
	les3 "github.com/racedecider/leaderelection/s3"
)

// The backends the program knows, in the order "all" runs them.
var backendNames = []string{"memory", "memory-poll", "gcs", "s3", "versitygw", "azblob", "dynamodb", "postgres", "kube"}

// server is an emulator the program does not start itself: the backend
// reads its address from env, which the start command prints.
type server struct {
	env, name, start string
}

// servers are the backends that need a server started beforehand.
var servers = map[string]server{
	"versitygw": {"LEADERELECTION_S3_ENDPOINT", "versitygw", `eval "$(scripts/versitygw.sh start)"`},
	"azblob":    {"LEADERELECTION_AZURITE_CONNECTION_STRING", "Azurite", `eval "$(scripts/azurite.sh start)"`},
	"dynamodb":  {"LEADERELECTION_DYNAMODB_ENDPOINT", "DynamoDB Local", `eval "$(scripts/dynamodb-local.sh start)"`},
	"postgres":  {"LEADERELECTION_POSTGRES_DSN", "PostgreSQL", `eval "$(scripts/postgres.sh start)"`},
	"kube":      {"LEADERELECTION_KUBECONFIG", "kube-apiserver", `eval "$(scripts/kube-apiserver.sh start)"`},
}

// errNoServer says a backend's server is not running (its variable is unset).
type errNoServer struct {
	backend string
	server
}

func (e errNoServer) Error() string {
	return fmt.Sprintf("backend %s needs %s: %s is unset; start it with: %s", e.backend, e.name, e.env, e.start)
}

// runID keeps this run's containers and tables apart from earlier runs' on a
// server that outlives them.
var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// instances numbers the backends of one run, several of which may use one
// server at once (the profile runs).
var instances atomic.Int64

// instanceID names one backend's container or table: the run and the
// backend's number in it.
func instanceID() string { return fmt.Sprintf("%s-%d", runID, instances.Add(1)) }

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
	// newPeer, if set, returns another Decider on the election of one
	// newStore returned, as another process would open it (-peers).
	newPeer func(of leaderelection.RaceDecider) (leaderelection.RaceDecider, error)
	close   func()
	// seq numbers the election objects of a server backend.
	seq atomic.Int64
	// shape, if set, makes the Shaper that stands between the store's
	// client and its server (a cloud profile): every HTTP request goes
	// through it. transport keeps it in shaper.
	shape  func(next http.RoundTripper) *faultproxy.Shaper
	shaper *faultproxy.Shaper
	// profiled names the cloud profile the shaper plays, for desc.
	profiled string
	// tally counts lost tenures and throttled writes over every election.
	tally tally
	// legacy runs candidates and watchers on the schedule from before
	// phased polls and the learning herd window (-legacy).
	legacy bool
}

// transport returns the HTTP transport the store's client uses: tr, behind
// the shaper when there is one.
func (b *backend) transport(tr *http.Transport) http.RoundTripper {
	if b.shape == nil {
		return tr
	}
	b.shaper = b.shape(tr)
	return b.shaper
}

// added describes what is added to each request, for desc.
func (b *backend) added() string {
	if b.shape != nil {
		return " behind the " + b.profiled + " profile"
	}
	return fmt.Sprintf(" + %v per request", b.latency)
}

const emulatorBucket = "leaderelection-bench"

func newBackend(ctx context.Context, name string, s *settings) (*backend, error) {
	return newShapedBackend(ctx, name, s, nil, "")
}

// newShapedBackend is newBackend with the store's HTTP traffic going through
// the Shaper that shape makes (if not nil), which plays the cloud profile
// named profiled, instead of the added latency.
func newShapedBackend(ctx context.Context, name string, s *settings, shape func(http.RoundTripper) *faultproxy.Shaper, profiled string) (*backend, error) {
	b := &backend{name: name, latency: s.latency, rtt: &rttLog{}, close: func() {}, shape: shape, profiled: profiled}
	if shape != nil {
		b.latency = 0
	}
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
			option.WithHTTPClient(&http.Client{Transport: b.transport(tr)}))
		if err != nil {
			srv.Stop()
			return nil, fmt.Errorf("storage client for fake-gcs-server: %w", err)
		}
		b.desc = "gcs.Decider on fake-gcs-server (in process, loopback HTTP)" + b.added() + ", polling"
		b.close = func() {
			client.Close()
			tr.CloseIdleConnections()
			srv.Stop()
		}
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) {
			return gcs.NewDecider(client, emulatorBucket, fmt.Sprintf("bench/election-%d", seq.Add(1)), gcs.WithMinWriteInterval(s.writeInterval))
		}
	case "s3":
		mem := s3mem.New()
		if err := mem.CreateBucket(emulatorBucket); err != nil {
			return nil, fmt.Errorf("gofakes3: creating bucket: %w", err)
		}
		srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		client := newS3Client(srv.URL, "bench", "bench", b.transport(tr))
		b.desc = "s3.Decider on gofakes3 + s3mem (in process, loopback HTTP)" + b.added() + ", polling"
		b.close = func() {
			tr.CloseIdleConnections()
			srv.Close()
		}
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) {
			return les3.NewDecider(client, emulatorBucket, fmt.Sprintf("bench/election-%d", seq.Add(1)))
		}
	case "versitygw", "azblob", "dynamodb", "postgres", "kube":
		srv := servers[name]
		addr := os.Getenv(srv.env)
		if addr == "" {
			return nil, errNoServer{name, srv}
		}
		if err := newServerBackend(ctx, b, addr, s); err != nil {
			return nil, fmt.Errorf("backend %s on %s (%s): %w", name, srv.name, srv.env, err)
		}
	default:
		return nil, fmt.Errorf("unknown backend %q (known: %v)", name, backendNames)
	}
	return b, nil
}

// newS3Client is an S3 client for an emulator at endpoint, in path style,
// whose retries of throttled answers stay short and unlimited by a token
// bucket, as the store's own answers are what the benchmark measures.
func newS3Client(endpoint, key, secret string, tr http.RoundTripper) *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(key, secret, ""),
		HTTPClient:   &http.Client{Transport: tr},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxBackoff = 50 * time.Millisecond
			o.RateLimiter = ratelimit.None
		}),
	})
}
