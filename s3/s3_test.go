package s3_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/racedecidertest"
	les3 "github.com/racedecider/leaderelection/s3"
)

var _ leaderelection.RaceDecider = (*les3.Decider)(nil)

func TestNewDeciderValidates(t *testing.T) {
	c := s3.New(s3.Options{Region: "us-east-1"})
	cases := []struct {
		name        string
		client      *s3.Client
		bucket, key string
		opts        []les3.Option
		want        []string
	}{
		{"empty bucket", c, "", "k", nil, []string{"bucket is empty"}},
		{"empty key", c, "b", "", nil, []string{"key is empty"}},
		{"both empty", c, "", "", nil, []string{"bucket is empty", "key is empty"}},
		{"nil client", nil, "b", "k", nil, []string{"client is nil"}},
		{"slash in bucket", c, "b/x", "k", nil, []string{`bucket "b/x"`}},
		{"key not UTF-8", c, "b", "jobs/\xff", nil, []string{`key "jobs/\xff" is not valid UTF-8`}},
		{"negative timeout", c, "b", "k", []les3.Option{les3.WithTimeout(-time.Second)}, []string{"timeout -1s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := les3.NewDecider(tc.client, tc.bucket, tc.key, tc.opts...)
			if err == nil {
				t.Fatalf("NewDecider(%q, %q) = %v, nil; want an error", tc.bucket, tc.key, d)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	d, err := les3.NewDecider(c, "b", "elections/job")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.String(); got != "s3://b/elections/job" {
		t.Errorf("String() = %q", got)
	}
}

// TestNonUTF8KeyRefused checks that a key that is not UTF-8 is refused by
// NewDecider, naming the key: S3 documents keys as UTF-8. When NewDecider
// lets one by, the test says what each store answers a read and a write of
// it (gofakes3 and versitygw take it).
func TestNonUTF8KeyRefused(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		key := newKey() + "\xff"
		d, err := les3.NewDecider(s.client(t, ""), s.bucket, key)
		if err == nil {
			_, rerr := d.ReadCurrent(t.Context())
			_, werr := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "l", WriteID: "w-0"})
			t.Fatalf("NewDecider(%q) accepted a key that is not UTF-8; ReadCurrent then gives %v, WriteEntry %v", key, rerr, werr)
		}
		if !strings.Contains(err.Error(), strconv.Quote(key)+" is not valid UTF-8") {
			t.Errorf("error %q does not say that the key %q is not UTF-8", err, key)
		}
	})
}

// TestConformance runs the conformance suite with 50 writers racing on one
// ETag for 20 rounds, and 50 concurrent creates of a new key.
func TestConformance(t *testing.T) {
	defer func(c, r int) { racedecidertest.Concurrency, racedecidertest.Rounds = c, r }(racedecidertest.Concurrency, racedecidertest.Rounds)
	racedecidertest.Concurrency, racedecidertest.Rounds = 50, 20
	forEachStore(t, func(t *testing.T, s *store) {
		c := s.client(t, "")
		racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
			d, _ := s.decider(t, c)
			return d
		})
	})
}

func TestCorruptRecords(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		c := s.client(t, "")
		d, key := s.decider(t, c)
		racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) {
			s.rawPut(t, c, key, data)
		}, s.objectName(key))
	})
}

// TestStaleWriterWithMatchingBodyCannotWin shows the hazard of content-derived
// ETags and that write ids close it. A stale writer holds the ETag of record
// A. The record then moves on to B and on to C, where C equals A in every
// field but the write id. Had C's body been identical to A's, it would have
// had A's ETag and the stale writer's If-Match would have held.
func TestStaleWriterWithMatchingBodyCannotWin(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		c := s.client(t, "")
		d, key := s.decider(t, c)
		ctx := t.Context()
		rec := func(n int64, writeID string) *entry.RaceEntry {
			return &entry.RaceEntry{
				ElectionNumber: n, Term: n, LeaderID: "leader-a",
				TermExpiry: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), WriteID: writeID,
			}
		}
		a := rec(1, "w-a")
		tokA, err := d.WriteEntry(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		bodyA := s.rawGet(t, c, key)

		b := rec(2, "w-b")
		b.Token = tokA
		tokB, err := d.WriteEntry(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		cRec := rec(1, "w-c") // like A but for the write id
		cRec.Token = tokB
		tokC, err := d.WriteEntry(ctx, cRec)
		if err != nil {
			t.Fatal(err)
		}
		if tokC.Version == tokA.Version {
			t.Fatalf("records differing only by write id got the same ETag %s", tokA.Version)
		}

		// The stale writer, still holding A's ETag, must lose.
		stale := rec(2, "w-stale")
		stale.Token = tokA
		if _, err := d.WriteEntry(ctx, stale); !errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("stale write conditioned on A's ETag: err = %v, want entry.ErrRaceLost", err)
		}
		if got, err := d.ReadCurrent(ctx); err != nil || got.WriteID != "w-c" {
			t.Fatalf("after the stale write: read %+v, %v; want write id w-c", got, err)
		}

		// Without the write id the hazard is real on this server: storing A's
		// exact bytes again gives A's ETag back, and the stale writer's
		// condition would hold.
		if etag := s.rawPut(t, c, key, bodyA); etag == tokA.Version {
			t.Logf("%s: ETags are content hashes (identical body gave ETag %s again): the write id is what keeps stale writers out", s.name, etag)
		} else {
			t.Logf("%s: identical bodies got different ETags (%s, %s)", s.name, tokA.Version, etag)
		}

		// Which is why a record without a write id is refused, unwritten.
		cur, err := d.ReadCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		noID := rec(3, "")
		noID.Token = cur.Token
		if _, err := d.WriteEntry(ctx, noID); !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "WriteID") {
			t.Fatalf("write without a write id: err = %v, want a refusal (it would fail again) about the WriteID", err)
		}
		if got := s.rawGet(t, c, key); !bytes.Equal(got, bodyA) {
			t.Fatalf("a write without a write id changed the object")
		}
	})
}

// TestIfMatchOnMissingRecordLosesRace: the record conditioned on was deleted
// (by hand: the backend never deletes). gofakes3 answers 412, AWS 404: both
// must read as a lost race, and the record as no elections.
func TestIfMatchOnMissingRecordLosesRace(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		c := s.client(t, "")
		d, key := s.decider(t, c)
		tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 0, LeaderID: "a", WriteID: "w-0"})
		if err != nil {
			t.Fatal(err)
		}
		s.rawDelete(t, c, key)
		_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", WriteID: "w-1", Token: tok})
		if !errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("If-Match write on a deleted record: err = %v, want entry.ErrRaceLost", err)
		}
		t.Logf("%s answers: %v", s.name, err)
		got, err := d.ReadCurrent(t.Context())
		if err != nil || got.ElectionNumber != entry.NoElections {
			t.Fatalf("read after delete = %+v, %v; want no elections", got, err)
		}
	})
}

func TestDeleted(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		c := s.client(t, "")
		d, key := s.decider(t, c)
		racedecidertest.CheckDeleted(t, d, func(t *testing.T) { s.rawDelete(t, c, key) })
	})
}

// TestMissingBucketIsRefused: a missing bucket must not read as an empty
// election, nor a write to it as a lost race or an unknown outcome: both
// are refusals naming the object.
func TestMissingBucketIsRefused(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		c := s.client(t, "")
		d, err := les3.NewDecider(c, "no-such-bucket-"+runID, "k")
		if err != nil {
			t.Fatal(err)
		}
		e, err := d.ReadCurrent(t.Context())
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "s3://no-such-bucket-") {
			t.Fatalf("read from a missing bucket = %+v, %v; want a refusal naming the object", e, err)
		}
		t.Logf("%s: read: %v", s.name, err)
		for _, tok := range []entry.LeaderToken{{}, {Version: `"0123456789abcdef0123456789abcdef"`}} {
			_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w", Token: tok})
			if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "s3://no-such-bucket-") {
				t.Fatalf("write to a missing bucket (token %q): %v; want a refusal naming the object", tok.Version, err)
			}
		}
	})
}

// TestLostRaceClass: the store's own 412 for a create of an existing object
// and for a stale ETag is a lost race, nothing else.
func TestLostRaceClass(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		d, _ := s.decider(t, s.client(t, ""))
		tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "b", WriteID: "w-b"}); classOf(err) != entry.ErrRaceLost {
			t.Errorf("create of an existing record: %v; want only entry.ErrRaceLost", err)
		}
		if _, err := d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", WriteID: "w-1", Token: tok}); err != nil {
			t.Fatal(err)
		}
		_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "c", WriteID: "w-c", Token: tok})
		if classOf(err) != entry.ErrRaceLost {
			t.Errorf("write on a stale ETag: %v; want only entry.ErrRaceLost", err)
		}
		t.Logf("%s: %v", s.name, err)
	})
}

// TestWrongCredentials: versitygw checks signatures (gofakes3 does not); a
// client with keys it does not know is refused, for reads and writes.
func TestWrongCredentials(t *testing.T) {
	s := versitygwStore(t)
	bad := *s
	bad.secret = "not-" + s.secret
	d, _ := bad.decider(t, bad.client(t, ""))
	_, rerr := d.ReadCurrent(t.Context())
	_, werr := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w"})
	for what, err := range map[string]error{"read": rerr, "write": werr} {
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "403") {
			t.Errorf("%s with a wrong secret key: %v; want a 403 refusal", what, err)
		}
	}
	t.Logf("read: %v", rerr)
}

// TestVirtualHostedRequests sends requests with the bucket in the host name
// (a client without UsePathStyle) to the real servers, through a dialer
// that resolves every name to them, as wildcard DNS would. Whatever they
// answer must not be a missing record or a lost race; a refusal suggests
// path_style=true.
func TestVirtualHostedRequests(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		addr := s.hostPort(t)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		t.Cleanup(tr.CloseIdleConnections)
		c := s3.New(s3.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String("http://s3.example.test:" + addr[strings.LastIndex(addr, ":")+1:]),
			Credentials:  credentials.NewStaticCredentialsProvider(s.access, s.secret, ""),
			HTTPClient:   &http.Client{Transport: tr},
		})
		d, err := les3.NewDecider(c, s.bucket, "elections/"+newKey())
		if err != nil {
			t.Fatal(err)
		}
		e, rerr := d.ReadCurrent(t.Context())
		if rerr == nil {
			t.Logf("%s serves virtual-hosted requests: read %+v", s.name, e)
			return
		}
		t.Logf("%s: read: %v", s.name, rerr)
		_, werr := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w"})
		t.Logf("%s: write: %v", s.name, werr)
		for what, err := range map[string]error{"read": rerr, "write": werr} {
			if classOf(err) != entry.ErrRefused {
				t.Errorf("%s: %v; want a refusal", what, err)
			} else if strings.Contains(err.Error(), "404") && !strings.Contains(err.Error(), "path_style=true") {
				t.Errorf("%s: %v; want a hint at path_style=true", what, err)
			}
		}
	})
}
