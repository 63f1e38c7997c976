package faultproxy

import (
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLatencySample checks that draws follow the distribution asked for: a
// statistical property of the draws, not a timing.
func TestLatencySample(t *testing.T) {
	l := Latency{Median: 100 * time.Millisecond, P99: 400 * time.Millisecond}
	r := rand.New(rand.NewPCG(1, 2))
	var ds []time.Duration
	for range 100000 {
		ds = append(ds, l.sample(r))
	}
	slices.Sort(ds)
	med, p99 := ds[len(ds)/2], ds[len(ds)*99/100]
	if med < 97*time.Millisecond || med > 103*time.Millisecond {
		t.Errorf("median %v, want about 100ms", med)
	}
	if p99 < 370*time.Millisecond || p99 > 430*time.Millisecond {
		t.Errorf("p99 %v, want about 400ms", p99)
	}
	if ds[len(ds)-1] > 3*l.P99 {
		t.Errorf("largest draw %v above the 3 x P99 cap", ds[len(ds)-1])
	}
	if got := (Latency{Median: time.Second}).sample(r); got != time.Second {
		t.Errorf("no tail: %v, want the median", got)
	}
	s := Profile{Read: l, Write: l, WriteLimit: Limit{Rate: 1, Burst: 2}}.Scaled(0.1)
	if s.Read.Median != 10*time.Millisecond || s.Write.P99 != 40*time.Millisecond || s.WriteLimit.Rate != 10 || s.WriteLimit.Burst != 2 {
		t.Errorf("Scaled(0.1) = %+v", s)
	}
}

// transport answers every request with status, like a store's emulator
// that accepts everything, and counts what reached it.
type transport struct {
	status int
	got    []string
}

func (tr *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	tr.got = append(tr.got, r.Method+" "+r.URL.Path+" "+string(body))
	return answer(r, tr.status, ""), nil
}

// TestShaperThrottlesWrites checks the per-object limit: a burst of writes
// to one object is cut at the bucket's size with the store's answer, writes
// to another object and reads are not, and only applied writes use it up.
func TestShaperThrottlesWrites(t *testing.T) {
	tr := &transport{status: http.StatusOK}
	// A rate so low that no token comes back during the test.
	s := NewShaper(tr, S3, Profile{WriteLimit: Limit{Rate: 1e-6, Burst: 2}}, 1)
	do := func(method, path string) int {
		req, _ := http.NewRequest(method, "http://store.test"+path, strings.NewReader("x"))
		resp, err := s.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusServiceUnavailable && !strings.Contains(string(body), "<Code>SlowDown</Code>") {
			t.Errorf("throttled answer %q lacks SlowDown", body)
		}
		return resp.StatusCode
	}
	var codes []int
	for range 4 {
		codes = append(codes, do(http.MethodPut, "/bucket/a"))
	}
	codes = append(codes, do(http.MethodPut, "/bucket/b"), do(http.MethodGet, "/bucket/a"))
	want := []int{200, 200, 503, 503, 200, 200}
	if !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
	st := s.Stats()
	if st.Throttled != 2 || st.Requests[OpWrite] != 5 || st.Requests[OpRead] != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(tr.got) != 4 || tr.got[0] != "PUT /bucket/a x" {
		t.Errorf("passed on %q, want the 4 unthrottled requests with their bodies", tr.got)
	}

	// Failed writes (a lost race) leave the limit alone.
	tr.status = http.StatusPreconditionFailed
	s.SetProfile(Profile{WriteLimit: Limit{Rate: 1e-6, Burst: 1}})
	for range 3 {
		if c := do(http.MethodPut, "/bucket/c"); c != http.StatusPreconditionFailed {
			t.Fatalf("write after lost races: %d, want 412 from the store", c)
		}
	}
}

// TestClassify checks how each Store names the requests its backend sends.
func TestClassify(t *testing.T) {
	cases := []struct {
		store        Store
		method, url  string
		header, body string
		op           Op
		object       string
	}{
		{GCS, "GET", "/storage/v1/b/bk/o/bench%2Felection-1?alt=json", "", "", OpRead, "bk/bench/election-1"},
		{GCS, "GET", "/bk/bench/election-1", "", "", OpRead, "bk/bench/election-1"},
		{GCS, "GET", "/storage/v1/b/bk?alt=json", "", "", OpOther, "bk"},
		{GCS, "POST", "/upload/storage/v1/b/bk/o?uploadType=multipart&ifGenerationMatch=3", "",
			"--x\r\nContent-Type: application/json\r\n\r\n{\"bucket\":\"bk\",\"name\":\"bench/election-1\"}\r\n--x\r\n", OpWrite, "bk/bench/election-1"},
		{GCS, "POST", "/upload/storage/v1/b/bk/o?uploadType=multipart&name=e2", "", "", OpWrite, "bk/e2"},
		{S3, "GET", "/bk/bench/election-1", "", "", OpRead, "bk/bench/election-1"},
		{S3, "PUT", "/bk/bench/election-1", "", "", OpWrite, "bk/bench/election-1"},
		{S3, "HEAD", "/bk", "", "", OpOther, "bk"},
		{AzureBlob, "PUT", "/devstoreaccount1/c/bench/election-1", "", "", OpWrite, "/devstoreaccount1/c/bench/election-1"},
		{AzureBlob, "GET", "/devstoreaccount1/c/bench/election-1", "", "", OpRead, "/devstoreaccount1/c/bench/election-1"},
		{AzureBlob, "PUT", "/devstoreaccount1/c?restype=container", "", "", OpOther, "/devstoreaccount1/c"},
		{DynamoDB("pk"), "POST", "/", "DynamoDB_20120810.PutItem", `{"TableName":"t","Item":{"pk":{"S":"e1"},"version":{"N":"2"}}}`, OpWrite, "t/e1"},
		{DynamoDB("pk"), "POST", "/", "DynamoDB_20120810.GetItem", `{"TableName":"t","Key":{"pk":{"S":"e1"}}}`, OpRead, "t/e1"},
		{DynamoDB("pk"), "POST", "/", "DynamoDB_20120810.DescribeTable", `{"TableName":"t"}`, OpOther, ""},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, "http://store.test"+c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.header != "" {
			req.Header.Set("X-Amz-Target", c.header)
		}
		op, obj := c.store.Classify(req, []byte(c.body))
		if op != c.op || obj != c.object {
			t.Errorf("%s: %s %s = %v %q, want %v %q", c.store.Name, c.method, c.url, op, obj, c.op, c.object)
		}
	}
}
