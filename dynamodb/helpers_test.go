package dynamodb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	ledynamodb "github.com/racedecider/leaderelection/dynamodb"
	"github.com/racedecider/leaderelection/internal/testenv"
)

// envEndpoint is what scripts/dynamodb-local.sh prints.
const envEndpoint = "LEADERELECTION_DYNAMODB_ENDPOINT"

// runID keeps this run's tables apart from earlier runs' on a DynamoDB Local
// that outlives them.
var (
	runID  = randomHex(4)
	tableN atomic.Int64
	keyN   atomic.Int64
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// store is DynamoDB Local with one table for the test.
type store struct {
	endpoint string // http://host:port
	table    string
	c        *ddb.Client // straight to the server
}

// newStore returns the DynamoDB Local started by scripts/dynamodb-local.sh,
// with a new table made by CreateTable, or skips the test.
func newStore(t *testing.T) *store {
	t.Helper()
	endpoint := testenv.Server(t, envEndpoint, "DynamoDB Local", `eval "$(scripts/dynamodb-local.sh start)"`)
	s := &store{endpoint: endpoint, table: fmt.Sprintf("le-test-%s-%d", runID, tableN.Add(1))}
	s.c = newClient(t, endpoint)
	if err := ledynamodb.CreateTable(t.Context(), s.c, s.table); err != nil {
		t.Fatalf("DynamoDB Local at %s: %v", endpoint, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = s.c.DeleteTable(ctx, &ddb.DeleteTableInput{TableName: aws.String(s.table)})
	})
	return s
}

// hostPort is the server's address, for a fault proxy to forward to.
func (s *store) hostPort(t *testing.T) string {
	u, err := url.Parse(s.endpoint)
	if err != nil {
		t.Fatalf("endpoint %q: %v", s.endpoint, err)
	}
	return u.Host
}

// newClient returns a DynamoDB client for endpoint with fixed dummy
// credentials (DynamoDB Local accepts any; it runs with -sharedDb). Retries
// back off for at most 50 ms and have no client-side quota, so that fault
// tests stay quick.
func newClient(t *testing.T, endpoint string) *ddb.Client {
	t.Helper()
	return newClientWith(t, endpoint, credentials.NewStaticCredentialsProvider("leaderelectiontest", "test-secret", ""))
}

// newClientWith is newClient with the credentials creds provides.
func newClientWith(t *testing.T, endpoint string, creds aws.CredentialsProvider) *ddb.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	t.Cleanup(tr.CloseIdleConnections)
	return ddb.New(ddb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  creds,
		HTTPClient:   &http.Client{Transport: tr},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxBackoff = 50 * time.Millisecond
			o.RateLimiter = ratelimit.None
		}),
	})
}

// newKey returns a key no other test uses.
func newKey() string { return fmt.Sprintf("election-%s-%d", runID, keyN.Add(1)) }

func (s *store) name(key string) string { return "dynamodb://" + s.table + "/" + key }

// decider returns a Decider on a new key, through client c (s.c when nil).
func (s *store) decider(t *testing.T, c *ddb.Client, opts ...ledynamodb.Option) (*ledynamodb.Decider, string) {
	t.Helper()
	if c == nil {
		c = s.c
	}
	key := newKey()
	d, err := ledynamodb.NewDecider(c, s.table, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d, key
}

// rawPut stores item attributes at key without conditions, bypassing the
// Decider.
func (s *store) rawPut(t *testing.T, key string, attrs map[string]types.AttributeValue) {
	t.Helper()
	item := map[string]types.AttributeValue{ledynamodb.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: key}}
	for k, v := range attrs {
		item[k] = v
	}
	if _, err := s.c.PutItem(t.Context(), &ddb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		t.Fatalf("raw PutItem %s: %v", s.name(key), err)
	}
}

// rawDelete deletes key's item, bypassing the Decider.
func (s *store) rawDelete(t *testing.T, key string) {
	t.Helper()
	_, err := s.c.DeleteItem(t.Context(), &ddb.DeleteItemInput{
		TableName: aws.String(s.table),
		Key:       map[string]types.AttributeValue{ledynamodb.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		t.Fatalf("raw DeleteItem %s: %v", s.name(key), err)
	}
}

// recordAttrs are the attributes of an item holding data as its record.
func recordAttrs(data []byte, version int, writeID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"record":   &types.AttributeValueMemberB{Value: data},
		"version":  &types.AttributeValueMemberN{Value: strconv.Itoa(version)},
		"write_id": &types.AttributeValueMemberS{Value: writeID},
	}
}
