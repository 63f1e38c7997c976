package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/racedecider/leaderelection/internal/testenv"
	les3 "github.com/racedecider/leaderelection/s3"
)

// The environment scripts/versitygw.sh prints. Without it the versitygw
// tests skip, or fail under testenv.RequireServers (as in CI).
const (
	envEndpoint  = "LEADERELECTION_S3_ENDPOINT"
	envAccessKey = "LEADERELECTION_S3_ACCESS_KEY"
	envSecretKey = "LEADERELECTION_S3_SECRET_KEY"
)

// runID keeps this run's keys apart from earlier runs' on a server whose data
// persists (versitygw).
var (
	runID   = randomHex(4)
	keySeq  atomic.Int64
	bucketN atomic.Int64
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// store is one S3 server the tests run against.
type store struct {
	name           string
	endpoint       string // http://host:port
	access, secret string
	bucket         string
}

// forEachStore runs fn against an in-process gofakes3 and against versitygw
// (skipped when it is not running), each as a subtest.
func forEachStore(t *testing.T, fn func(t *testing.T, s *store)) {
	t.Run("gofakes3", func(t *testing.T) { fn(t, gofakes3Store(t)) })
	t.Run("versitygw", func(t *testing.T) { fn(t, versitygwStore(t)) })
}

// gofakes3Store starts gofakes3 with its in-memory backend on a real
// loopback listener, with one bucket.
func gofakes3Store(t *testing.T) *store {
	t.Helper()
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	s := &store{name: "gofakes3", endpoint: srv.URL, access: "test", secret: "test", bucket: "elections"}
	if err := backend.CreateBucket(s.bucket); err != nil {
		t.Fatalf("gofakes3: creating bucket: %v", err)
	}
	return s
}

// versitygwStore returns the versitygw started by scripts/versitygw.sh, with
// a bucket for this run, or skips the test.
func versitygwStore(t *testing.T) *store {
	t.Helper()
	endpoint := testenv.Server(t, envEndpoint, "versitygw", `eval "$(scripts/versitygw.sh start)"`)
	s := &store{
		name:     "versitygw",
		endpoint: endpoint,
		access:   os.Getenv(envAccessKey),
		secret:   os.Getenv(envSecretKey),
		bucket:   fmt.Sprintf("le-test-%s-%d", runID, bucketN.Add(1)),
	}
	c := s.client(t, "")
	_, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(s.bucket)})
	if err != nil {
		t.Fatalf("versitygw at %s: creating bucket %s: %v", endpoint, s.bucket, err)
	}
	t.Cleanup(func() { s.removeBucket(c) })
	return s
}

// hostPort is the store's address, for a fault proxy to forward to.
func (s *store) hostPort(t *testing.T) string {
	u, err := url.Parse(s.endpoint)
	if err != nil {
		t.Fatalf("endpoint %q: %v", s.endpoint, err)
	}
	return u.Host
}

// client returns an S3 client for the store, through endpoint when it is not
// empty (a fault proxy's "http://addr"). Retries back off for at most 50 ms
// and have no client-side quota, so that fault tests stay quick.
func (s *store) client(t *testing.T, endpoint string) *s3.Client {
	t.Helper()
	if endpoint == "" {
		endpoint = s.endpoint
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	t.Cleanup(tr.CloseIdleConnections)
	httpClient := &http.Client{Transport: tr}
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.access, s.secret, ""),
		HTTPClient:   httpClient,
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxBackoff = 50 * time.Millisecond
			o.RateLimiter = ratelimit.None
		}),
	})
}

// newKey returns a key no other test uses.
func newKey() string {
	return fmt.Sprintf("election-%s-%d", runID, keySeq.Add(1))
}

func (s *store) objectName(key string) string { return "s3://" + s.bucket + "/" + key }

// decider returns a Decider on a new key.
func (s *store) decider(t *testing.T, c *s3.Client, opts ...les3.Option) (*les3.Decider, string) {
	t.Helper()
	key := newKey()
	d, err := les3.NewDecider(c, s.bucket, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d, key
}

// rawPut stores data at key without conditions, bypassing the Decider, and
// returns the ETag.
func (s *store) rawPut(t *testing.T, c *s3.Client, key string, data []byte) string {
	t.Helper()
	out, err := c.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(key),
		Body:   bytes.NewReader(data),
	})
	if err != nil {
		t.Fatalf("raw PutObject %s: %v", s.objectName(key), err)
	}
	return aws.ToString(out.ETag)
}

// rawDelete deletes key, bypassing the Decider.
func (s *store) rawDelete(t *testing.T, c *s3.Client, key string) {
	t.Helper()
	_, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("raw DeleteObject %s: %v", s.objectName(key), err)
	}
}

// rawGet reads key's bytes, bypassing the Decider.
func (s *store) rawGet(t *testing.T, c *s3.Client, key string) []byte {
	t.Helper()
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		var nsk *types.NoSuchKey
		if errors.As(err, &nsk) {
			return nil
		}
		t.Fatalf("raw GetObject %s: %v", s.objectName(key), err)
	}
	defer out.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(out.Body); err != nil {
		t.Fatalf("raw GetObject %s: %v", s.objectName(key), err)
	}
	return buf.Bytes()
}

// removeBucket deletes the bucket and everything in it, so that test runs do
// not pile up in versitygw's data directory. Failures are ignored.
func (s *store) removeBucket(c *s3.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return
		}
		for _, o := range page.Contents {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: o.Key})
		}
	}
	_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(s.bucket)})
}
