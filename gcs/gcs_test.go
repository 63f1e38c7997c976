package gcs_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/gcs"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

var _ leaderelection.RaceDecider = (*gcs.Decider)(nil)

func TestConformance(t *testing.T) {
	em := newEmulator(t)
	c := newClient(t, em.addr)
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
		return newDecider(t, c, freshObject(t))
	})
}

// TestConformanceJSONReads runs the suite with the storage client reading
// through the JSON API instead of the default XML API.
func TestConformanceJSONReads(t *testing.T) {
	em := newEmulator(t)
	c := newClient(t, em.addr, storage.WithJSONReads())
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
		return newDecider(t, c, freshObject(t))
	})
}

func TestDeleted(t *testing.T) {
	em := newEmulator(t)
	c := newClient(t, em.addr)
	object := freshObject(t)
	racedecidertest.CheckDeleted(t, newDecider(t, c, object), func(t *testing.T) {
		if err := c.Bucket(testBucket).Object(object).Delete(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCorrupt(t *testing.T) {
	em := newEmulator(t)
	object := freshObject(t)
	d := newDecider(t, newClient(t, em.addr), object)
	racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) { em.setRaw(object, data) },
		"gs://"+testBucket+"/"+object)
}

func TestOversizedObjectIsCorrupt(t *testing.T) {
	em := newEmulator(t)
	object := freshObject(t)
	d := newDecider(t, newClient(t, em.addr), object)
	em.setRaw(object, make([]byte, 2<<20))
	_, err := d.ReadCurrent(t.Context())
	if !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(err.Error(), d.String()) {
		t.Fatalf("ReadCurrent of a 2 MiB object: %v; want an error wrapping ErrCorruptRecord naming %s", err, d)
	}
}

// TestManyWritersOneGeneration races 50 candidates, each with its own client,
// writing conditioned on the same generation, 20 rounds. The emulator applies
// an upload's generation check and the store under one mutex, so it is
// faithful here; one limit: it takes the new generation from the wall clock
// in microseconds, so two successful writes to one object within the same
// microsecond would share a generation. Every round here waits for a read
// between successful writes, so that cannot happen.
func TestManyWritersOneGeneration(t *testing.T) {
	const writers, rounds = 50, 20
	em := newEmulator(t)
	object := freshObject(t)
	ds := make([]leaderelection.RaceDecider, writers)
	for i := range ds {
		ds[i] = newDecider(t, newClient(t, em.addr), object)
	}
	racedecidertest.RaceWriters(t, ds, rounds)
}

func TestNewDeciderValidates(t *testing.T) {
	em := newEmulator(t)
	c := newClient(t, em.addr)
	cases := []struct {
		name           string
		client         *storage.Client
		bucket, object string
		opts           []gcs.Option
		want           string // in the error
	}{
		{"nil client", nil, "b-1", "o", nil, "client is nil"},
		{"empty bucket", c, "", "o", nil, "bucket name is empty"},
		{"empty object", c, "b-1", "", nil, "object name is empty"},
		{"uppercase bucket", c, "My-Bucket", "o", nil, `"My-Bucket"`},
		{"short bucket", c, "ab", "o", nil, `"ab"`},
		{"bucket ends with dash", c, "abc-", "o", nil, `"abc-"`},
		{"newline in object", c, "b-1", "a\nb", nil, `"a\nb"`},
		{"dot object", c, "b-1", "..", nil, `".."`},
		{"bad predefined ACL", c, "b-1", "o", []gcs.Option{gcs.WithPredefinedACL("everyone")}, `"everyone"`},
		{"negative write interval", c, "b-1", "o", []gcs.Option{gcs.WithMinWriteInterval(-time.Second)}, "-1s is negative"},
		{"both ACL kinds", c, "b-1", "o", []gcs.Option{
			gcs.WithPredefinedACL("private"),
			gcs.WithACL(storage.ACLRule{Entity: storage.AllUsers, Role: storage.RoleReader}),
		}, "cannot be combined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := gcs.NewDecider(tc.client, tc.bucket, tc.object, tc.opts...)
			if err == nil {
				t.Fatalf("NewDecider returned %v and no error", d)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %s", err, tc.want)
			}
		})
	}
	both, err := gcs.NewDecider(nil, "", "")
	if err == nil || !strings.Contains(err.Error(), "client") || !strings.Contains(err.Error(), "bucket") || !strings.Contains(err.Error(), "object") {
		t.Errorf("NewDecider(nil, \"\", \"\") = %v, %v; want one error naming all three problems", both, err)
	}
	d, err := gcs.NewDecider(c, "my.bucket_1", "a/b c/ü")
	if err != nil {
		t.Fatalf("valid names rejected: %v", err)
	}
	if d.String() != "gs://my.bucket_1/a/b c/ü" {
		t.Errorf("String() = %q", d.String())
	}
	// Cloud Storage's rate for one object, declared to the engine.
	var ws leaderelection.WriteSpacer = d
	if got := ws.MinWriteInterval(); got != time.Second {
		t.Errorf("MinWriteInterval() = %v, want 1s by default", got)
	}
	if d, _ := gcs.NewDecider(c, "b-1", "o", gcs.WithMinWriteInterval(0)); d.MinWriteInterval() != 0 {
		t.Errorf("WithMinWriteInterval(0) gave %v", d.MinWriteInterval())
	}
}

// TestStoredObject checks how the record object is written: content type,
// no caching, the predefined ACL, and a release that is a write, not a delete.
func TestStoredObject(t *testing.T) {
	em := newEmulator(t)
	object := freshObject(t)
	d := newDecider(t, newClient(t, em.addr), object, gcs.WithPredefinedACL("publicRead"))
	e := &entry.RaceEntry{ElectionNumber: 0, LeaderID: "a", TermExpiry: time.Now(), WriteID: "w0"}
	tok, err := d.WriteEntry(t.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := em.srv.GetObject(testBucket, object)
	if err != nil {
		t.Fatal(err)
	}
	if obj.ContentType != gcs.ContentType || obj.CacheControl != "no-store" {
		t.Errorf("stored content type %q, cache control %q; want %q, no-store", obj.ContentType, obj.CacheControl, gcs.ContentType)
	}
	if fmt.Sprint(obj.Generation) != tok.Version {
		t.Errorf("stored generation %d, token %q", obj.Generation, tok.Version)
	}
	public := false
	for _, r := range obj.ACL {
		public = public || r.Entity == storage.AllUsers && r.Role == storage.RoleReader
	}
	if !public {
		t.Errorf("WithPredefinedACL(publicRead): stored ACL %+v has no allUsers reader", obj.ACL)
	}

	released := &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", TermExpiry: time.Now(), Released: true, WriteID: "w1", Token: tok}
	if _, err := d.WriteEntry(t.Context(), released); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadCurrent(t.Context())
	if err != nil || !got.Released || got.WriteID != "w1" {
		t.Fatalf("after a release: %+v, %v; want the released record", got, err)
	}
}

// TestCommitTimes checks the store's clock readings carried in tokens: exact
// for writes, whole seconds for XML reads, absent for JSON reads.
func TestCommitTimes(t *testing.T) {
	em := newEmulator(t)
	object := freshObject(t)
	d := newDecider(t, newClient(t, em.addr), object)
	before := time.Now()
	tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", TermExpiry: before, WriteID: "w0"})
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// The emulator shares this process's clock, so the commit time lies
	// between sending and the reply (to the emulator's microseconds).
	if tok.CommitTime.Before(before.Truncate(time.Millisecond)) || tok.CommitTime.After(after) {
		t.Errorf("write CommitTime %v not within [%v, %v]", tok.CommitTime, before, after)
	}
	got, err := d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := tok.CommitTime.Truncate(time.Second); !got.Token.CommitTime.Equal(want) {
		t.Errorf("XML read CommitTime %v, want the write's truncated to the second, %v", got.Token.CommitTime, want)
	}
	jd := newDecider(t, newClient(t, em.addr, storage.WithJSONReads()), object)
	got, err = jd.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.Token.Version != tok.Version {
		t.Errorf("JSON read token %q, want %q", got.Token.Version, tok.Version)
	}
}

func TestBadToken(t *testing.T) {
	em := newEmulator(t)
	d := newDecider(t, newClient(t, em.addr), freshObject(t))
	for _, v := range []string{"abc", "-3", "0", "\"etag\""} {
		_, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w", Token: entry.LeaderToken{Version: v}})
		if err == nil || errors.Is(err, entry.ErrRaceLost) || !strings.Contains(err.Error(), "generation") {
			t.Errorf("write conditioned on token %q: %v; want an error about the token", v, err)
		}
	}
}

// TestClientRetrySettings uses a client with its own retry settings from many
// goroutines: the Decider must neither change those settings nor race on
// them (run with -race).
func TestClientRetrySettings(t *testing.T) {
	em := newEmulator(t)
	c := newClient(t, em.addr)
	c.SetRetry(storage.WithPolicy(storage.RetryAlways), storage.WithMaxAttempts(3))
	d := newDecider(t, c, freshObject(t))
	tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := d.ReadCurrent(t.Context()); err != nil {
				t.Error(err)
			}
			_, err := d.WriteEntry(t.Context(), faultproxy.Record(1, fmt.Sprintf("w1-%d", i), tok))
			if err != nil && !errors.Is(err, entry.ErrRaceLost) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
