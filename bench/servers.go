package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	leaderelection "github.com/racedecider/leaderelection"
	leazblob "github.com/racedecider/leaderelection/azblob"
	ledynamodb "github.com/racedecider/leaderelection/dynamodb"
	"github.com/racedecider/leaderelection/kube"
	"github.com/racedecider/leaderelection/postgres"
	les3 "github.com/racedecider/leaderelection/s3"
)

// newServerBackend fills b for a backend whose server runs outside the
// program at addr (the value of its variable). Each backend gets a
// container or table of its own, removed by b.close; each election is one
// blob, item or row in it (a Lease for kube, in the default namespace, each
// deleted by b.close).
func newServerBackend(ctx context.Context, b *backend, addr string, s *settings) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	id := instanceID()
	switch b.name {
	case "versitygw":
		client := newS3Client(addr, os.Getenv("LEADERELECTION_S3_ACCESS_KEY"), os.Getenv("LEADERELECTION_S3_SECRET_KEY"), b.transport(tr))
		bucket := "le-bench-" + id
		if _, err := client.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			return fmt.Errorf("creating bucket %s: %w", bucket, err)
		}
		b.desc = "s3.Decider on versitygw (separate process, loopback HTTP)" + b.added() + ", polling"
		b.close = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for n := range b.seq.Load() {
				_, _ = client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("bench/election-%d", n+1))})
			}
			_, _ = client.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(bucket)})
			tr.CloseIdleConnections()
		}
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) {
			return les3.NewDecider(client, bucket, fmt.Sprintf("bench/election-%d", b.seq.Add(1)))
		}
	case "azblob":
		// Azurite closes a connection idle for 5 s; a write sent on it as it
		// closes fails with a reset, an unknown outcome the engine would
		// have to resolve. Never reuse one that old.
		tr.IdleConnTimeout = 2 * time.Second
		name := "le-bench-" + id
		client, err := container.NewClientFromConnectionString(addr, name, &container.ClientOptions{
			ClientOptions: azcore.ClientOptions{
				Transport: &http.Client{Transport: b.transport(tr)},
				Retry:     policy.RetryOptions{MaxRetries: 3, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond},
			},
		})
		if err != nil {
			return fmt.Errorf("container client: %w", err)
		}
		if _, err := client.Create(ctx, nil); err != nil {
			return fmt.Errorf("creating container %s: %w", name, err)
		}
		b.desc = "azblob.Decider on Azurite (separate process, loopback HTTP)" + b.added() + ", polling"
		b.close = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = client.Delete(ctx, nil)
			tr.CloseIdleConnections()
		}
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) {
			return leazblob.NewDecider(client, fmt.Sprintf("bench/election-%d", b.seq.Add(1)))
		}
	case "dynamodb":
		client := ddb.New(ddb.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(addr),
			// DynamoDB Local accepts any credentials.
			Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", ""),
			HTTPClient:  &http.Client{Transport: b.transport(tr)},
			Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxBackoff = 50 * time.Millisecond
				o.RateLimiter = ratelimit.None
			}),
		})
		table := "le-bench-" + id
		if err := ledynamodb.CreateTable(ctx, client, table); err != nil {
			return err
		}
		b.desc = "dynamodb.Decider on DynamoDB Local (separate process, loopback HTTP)" + b.added() + ", polling"
		b.close = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = client.DeleteTable(ctx, &ddb.DeleteTableInput{TableName: aws.String(table)})
			tr.CloseIdleConnections()
		}
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) {
			return ledynamodb.NewDecider(client, table, fmt.Sprintf("election-%d", b.seq.Add(1)))
		}
	case "postgres":
		cfg, err := pgxpool.ParseConfig(addr)
		if err != nil {
			return fmt.Errorf("parsing the DSN: %w", err)
		}
		// The default (4 on this machine) would queue a herd's reads behind
		// each other. Each election's listener takes a connection of its
		// own out of the pool, so it does not count against this.
		cfg.MaxConns = 32
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return err
		}
		table := "le_bench_" + id
		if err := postgres.CreateTable(ctx, pool, table); err != nil {
			pool.Close()
			return err
		}
		b.push = true
		b.desc = "postgres.Decider on PostgreSQL (separate process, loopback TCP)" + b.added() + ", LISTEN/NOTIFY"
		b.close = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
			pool.Close()
		}
		// cluster.close closes each Decider, ending its listener.
		b.byName(func() string { return fmt.Sprintf("election-%d", b.seq.Add(1)) }, func(name string) (leaderelection.RaceDecider, error) {
			d, err := postgres.New(pool, table, name)
			if err != nil {
				return nil, err
			}
			return d, nil
		})
	case "kube":
		cfg, err := clientcmd.BuildConfigFromFlags("", addr)
		if err != nil {
			return fmt.Errorf("loading the kubeconfig: %w", err)
		}
		// client-go's own rate limit (5 requests a second) would queue a
		// herd's reads; the API server's limits are what is measured.
		cfg.QPS, cfg.Burst = -1, 0
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		const namespace = "default"
		prefix := "le-bench-" + id + "-"
		b.push = true
		b.desc = "kube.Decider on kube-apiserver + etcd (separate processes, loopback HTTPS)" + b.added() + ", watch"
		b.close = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			leases := client.CoordinationV1().Leases(namespace)
			for i := int64(1); i <= b.seq.Load(); i++ {
				_ = leases.Delete(ctx, fmt.Sprintf("%s%d", prefix, i), metav1.DeleteOptions{})
			}
		}
		// cluster.close closes each Decider, ending its watch.
		b.byName(func() string { return fmt.Sprintf("%s%d", prefix, b.seq.Add(1)) }, func(name string) (leaderelection.RaceDecider, error) {
			d, err := kube.NewDecider(client, namespace, name)
			if err != nil {
				return nil, err
			}
			return d, nil
		})
	}
	return nil
}

// byName sets b.newStore to open a Decider on the election next names, and
// b.newPeer to open another on the election of one it returned (-peers).
func (b *backend) byName(next func() string, open func(name string) (leaderelection.RaceDecider, error)) {
	var names sync.Map // Decider -> its election's name
	b.newStore = func(context.Context) (leaderelection.RaceDecider, error) {
		name := next()
		d, err := open(name)
		if err == nil {
			names.Store(d, name)
		}
		return d, err
	}
	b.newPeer = func(of leaderelection.RaceDecider) (leaderelection.RaceDecider, error) {
		name, ok := names.Load(of)
		if !ok {
			return nil, fmt.Errorf("%v is not a Decider this backend made", of)
		}
		return open(name.(string))
	}
}
