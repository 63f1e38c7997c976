package azblob_test

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	leaderelection "github.com/racedecider/leaderelection"
	leazblob "github.com/racedecider/leaderelection/azblob"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

var _ leaderelection.RaceDecider = (*leazblob.Decider)(nil)

func TestNewDeciderValidates(t *testing.T) {
	c, err := container.NewClientWithNoCredential("https://acct.blob.core.windows.net/elections", nil)
	if err != nil {
		t.Fatal(err)
	}
	noContainer, err := container.NewClientWithNoCredential("https://acct.blob.core.windows.net/", nil)
	if err != nil {
		t.Fatal(err)
	}
	short, upper, hyphens := containerAt(t, "ab"), containerAt(t, "Elections"), containerAt(t, "le--jobs")
	cases := []struct {
		name   string
		client *container.Client
		blob   string
		opts   []leazblob.Option
		want   []string
	}{
		{"empty blob", c, "", nil, []string{"blob name is empty"}},
		{"nil client", nil, "b", nil, []string{"container client is nil"}},
		{"both", nil, "", nil, []string{"container client is nil", "blob name is empty"}},
		{"trailing slash", c, "elections/", nil, []string{`"elections/" ends with`}},
		{"too long", c, strings.Repeat("x", 1025), nil, []string{"1025 characters long, more than 1024"}},
		{"too long in characters", c, strings.Repeat("é", 1025), nil, []string{"1025 characters long, more than 1024"}},
		{"not UTF-8", c, "jobs/\xff", nil, []string{`blob name "jobs/\xff" is not valid UTF-8`}},
		{"backslash", c, `jobs\report`, nil, []string{`blob name "jobs\\report" holds a backslash`}},
		{"no container", noContainer, "b", nil, []string{"names no container"}},
		{"container too short", short, "b", nil, []string{`container name "ab"`, "its length is 2"}},
		{"container uppercase", upper, "b", nil, []string{`container name "Elections"`, "uppercase"}},
		{"container double hyphen", hyphens, "b", nil, []string{`container name "le--jobs"`, "two hyphens in a row"}},
		{"negative timeout", c, "b", []leazblob.Option{leazblob.WithTimeout(-time.Second)}, []string{"timeout -1s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := leazblob.NewDecider(tc.client, tc.blob, tc.opts...)
			if err == nil {
				t.Fatalf("NewDecider(%q) = %v, nil; want an error", tc.blob, d)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// Azure's limit is 1024 characters, not bytes: 1024 "é" are 2048.
	if _, err := leazblob.NewDecider(c, strings.Repeat("é", 1024)); err != nil {
		t.Errorf("NewDecider with a name of 1024 characters (2048 bytes): %v", err)
	}
	// A system container, left to the service.
	if _, err := leazblob.NewDecider(containerAt(t, "$root"), "b"); err != nil {
		t.Errorf("NewDecider in $root: %v", err)
	}
	d, err := leazblob.NewDecider(c, "jobs/report")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.String(); got != "azblob://elections/jobs/report" {
		t.Errorf("String() = %q", got)
	}
	// The account in the path (Azurite, or any endpoint not named for
	// the account), under a host name or an IP address.
	for _, ep := range []string{"http://localhost:10000/devstoreaccount1/elections", "http://127.0.0.1:10000/devstoreaccount1/elections/"} {
		c, err := container.NewClientWithNoCredential(ep, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := leazblob.NewDecider(c, "b")
		if err != nil {
			t.Fatal(err)
		}
		if got := d.String(); got != "azblob://elections/b" {
			t.Errorf("with the container at %s: String() = %q, want azblob://elections/b", ep, got)
		}
	}
}

// containerAt returns a client for the container named so in an Azure
// account, which no test sends a request to.
func containerAt(t *testing.T, name string) *container.Client {
	t.Helper()
	c, err := container.NewClientWithNoCredential("https://acct.blob.core.windows.net/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNonUTF8BlobNameRefused checks that a blob name that is not UTF-8 is
// refused by NewDecider: no request can name it (Azurite answers every one
// with a 500, an unknown outcome that the engine would retry for ever).
func TestNonUTF8BlobNameRefused(t *testing.T) {
	s := azurite(t)
	name := newBlob() + "\xff"
	d, err := leazblob.NewDecider(s.client(t, "", s.container), name)
	if err == nil {
		_, rerr := d.ReadCurrent(t.Context())
		t.Fatalf("NewDecider(%q) accepted a blob name that is not UTF-8; ReadCurrent then gives %v", name, rerr)
	}
	if !strings.Contains(err.Error(), strconv.Quote(name)+" is not valid UTF-8") {
		t.Errorf("error %q does not say that the blob name %q is not UTF-8", err, name)
	}
}

// TestLongNonASCIIBlobName: Azure limits blob names to 1024 characters, not
// bytes. A name of 1000 "é" (2000 bytes) is accepted by NewDecider and by the
// store, which holds and returns the record under it.
func TestLongNonASCIIBlobName(t *testing.T) {
	s := azurite(t)
	prefix := newBlob() + "/"
	name := prefix + strings.Repeat("é", 1000-len(prefix))
	d, err := leazblob.NewDecider(s.client(t, "", s.container), name)
	if err != nil {
		t.Fatalf("NewDecider with a name of %d characters (%d bytes): %v", len([]rune(name)), len(name), err)
	}
	tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "l", WriteID: "w-0"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadCurrent(t.Context())
	if err != nil || got.WriteID != "w-0" || got.Token.Version != tok.Version {
		t.Fatalf("read back %+v, %v; want write w-0 with version %q", got, err, tok.Version)
	}
}

// TestBackslashInBlobNameRefused: Blob Storage (and Azurite) stores a
// backslash in a blob name as a forward slash, so jobs\report and jobs/report
// would be one blob, and their elections would share one record. NewDecider
// refuses the name with the backslash.
func TestBackslashInBlobNameRefused(t *testing.T) {
	s := azurite(t)
	slash := newBlob() + "/report"
	back := strings.ReplaceAll(slash, "/", `\`)
	d, err := leazblob.NewDecider(s.client(t, "", s.container), back)
	if err == nil {
		other, err := leazblob.NewDecider(s.client(t, "", s.container), slash)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w-0", entry.LeaderToken{})); err != nil {
			t.Fatal(err)
		}
		rec, err := other.ReadCurrent(t.Context())
		t.Fatalf("NewDecider(%q) accepted a blob name with a backslash; the election %q then reads %+v, %v", back, slash, rec, err)
	}
	if !strings.Contains(err.Error(), strconv.Quote(back)+" holds a backslash") {
		t.Errorf("error %q does not say that the blob name %q holds a backslash", err, back)
	}
}

// TestConformance runs the conformance suite with 50 writers racing on one
// ETag for 20 rounds, and 50 concurrent creates of a new blob.
func TestConformance(t *testing.T) {
	defer func(c, r int) { racedecidertest.Concurrency, racedecidertest.Rounds = c, r }(racedecidertest.Concurrency, racedecidertest.Rounds)
	racedecidertest.Concurrency, racedecidertest.Rounds = 50, 20
	s := azurite(t)
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
		d, _ := s.decider(t, "")
		return d
	})
}

// TestRaceWriters: 50 writers, each with its own client and connections,
// race to create the blob and then on one ETag.
func TestRaceWriters(t *testing.T) {
	s := azurite(t)
	name := newBlob()
	ds := make([]leaderelection.RaceDecider, 50)
	for i := range ds {
		d, err := leazblob.NewDecider(s.client(t, "", s.container), name)
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = d
	}
	racedecidertest.RaceWriters(t, ds, 10)
}

func TestCorruptRecords(t *testing.T) {
	s := azurite(t)
	d, name := s.decider(t, "")
	racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) {
		s.rawPut(t, name, data)
	}, s.objectName(name))
}

// TestIfMatchOnDeletedBlobLosesRace: the record conditioned on was deleted
// (by hand: the backend never deletes). Azure answers 404 BlobNotFound: a
// lost race, and the record reads as no elections.
func TestIfMatchOnDeletedBlobLosesRace(t *testing.T) {
	s := azurite(t)
	d, name := s.decider(t, "")
	tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w-0", entry.LeaderToken{}))
	s.rawDelete(t, name)
	_, err := d.WriteEntry(t.Context(), faultproxy.Record(1, "w-1", tok))
	if !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("If-Match write on a deleted blob: err = %v, want entry.ErrRaceLost", err)
	}
	t.Logf("Azurite answers: %v", err)
	if got := faultproxy.MustRead(t, d); got.ElectionNumber != entry.NoElections {
		t.Fatalf("read after delete = %+v; want no elections", got)
	}
}

func TestDeleted(t *testing.T) {
	s := azurite(t)
	d, name := s.decider(t, "")
	racedecidertest.CheckDeleted(t, d, func(t *testing.T) { s.rawDelete(t, name) })
}

// TestCreateOnExistingBlobLosesRace: If-None-Match: * on an existing blob.
func TestCreateOnExistingBlobLosesRace(t *testing.T) {
	s := azurite(t)
	d, _ := s.decider(t, "")
	faultproxy.MustWrite(t, d, faultproxy.Record(0, "w-0", entry.LeaderToken{}))
	_, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w-1", entry.LeaderToken{}))
	if !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("create on an existing blob: err = %v, want entry.ErrRaceLost", err)
	}
	t.Logf("Azurite answers: %v", err)
}

// TestInvalidContainerNameRefused: a container name that breaks Azure's
// naming rules is refused by NewDecider, naming it, rather than sent to the
// store. When NewDecider lets one by, the test says what the store answers a
// read, a write and a campaign.
func TestInvalidContainerNameRefused(t *testing.T) {
	s := azurite(t)
	for _, name := range []string{"Elections", "ab", "le--" + runID, "le_" + runID, "-le" + runID, strings.Repeat("x", 64)} {
		t.Run(name, func(t *testing.T) {
			d, err := leazblob.NewDecider(s.client(t, "", name), "k")
			if err == nil {
				_, rerr := d.ReadCurrent(t.Context())
				_, werr := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "l", WriteID: "w-0"})
				t.Fatalf("NewDecider accepted container %q; ReadCurrent then gives %v, WriteEntry %v, Acquire %v",
					name, rerr, werr, racedecidertest.AcquireEnds(t, d))
			}
			if !strings.Contains(err.Error(), "container name "+strconv.Quote(name)) {
				t.Errorf("error %q does not name the container %q", err, name)
			}
		})
	}
}

// TestMissingContainerIsRefused: a missing container must not read as an
// empty election, nor a write to it as a lost race.
func TestMissingContainerIsRefused(t *testing.T) {
	s := azurite(t)
	missing := "no-such-container-" + runID
	d, err := leazblob.NewDecider(s.client(t, "", missing), "k")
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.ReadCurrent(t.Context())
	if !errors.Is(err, entry.ErrRefused) {
		t.Fatalf("read from a missing container = %+v, %v; want entry.ErrRefused", e, err)
	}
	if !strings.Contains(err.Error(), "azblob://"+missing+"/k") {
		t.Errorf("error %q does not name the blob", err)
	}
	for _, tok := range []entry.LeaderToken{{}, {Version: `"0x8DD00000000000"`}} {
		_, err = d.WriteEntry(t.Context(), faultproxy.Record(1, "w", tok))
		if !errors.Is(err, entry.ErrRefused) || errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("write (token %q) to a missing container: err = %v, want entry.ErrRefused", tok.Version, err)
		}
	}
	t.Logf("missing container: %v", err)
}

// TestWrongKeyIsRefused: Azure answers 403 AuthenticationFailed (Azurite:
// AuthorizationFailure) to a request signed with the wrong key.
func TestWrongKeyIsRefused(t *testing.T) {
	s := azurite(t)
	wrongKey := "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleS0xMjM0NTY3ODkwMTIzNDU2Nzg5MA=="
	c := s.clientWithKey(t, "", s.container, wrongKey)
	d, err := leazblob.NewDecider(c, newBlob())
	if err != nil {
		t.Fatal(err)
	}
	_, rerr := d.ReadCurrent(t.Context())
	_, werr := d.WriteEntry(t.Context(), faultproxy.Record(0, "w", entry.LeaderToken{}))
	for what, err := range map[string]error{"read": rerr, "write": werr} {
		if !errors.Is(err, entry.ErrRefused) {
			t.Errorf("%s with a wrong key: err = %v, want entry.ErrRefused", what, err)
			continue
		}
		for _, secret := range []string{wrongKey, s.key} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s error repeats a key: %v", what, err)
			}
		}
		t.Logf("%s: %v", what, err)
	}
}

// TestLeasedBlob: a blob lease taken by someone else makes every write fail
// with 412 LeaseIdMissing, which is no lost race. An infinite lease will not
// heal by reading again: a refusal. A lease of fixed duration ends within a
// minute unless renewed, and one being broken ends too: throttling, which
// the engine retries with backoff.
func TestLeasedBlob(t *testing.T) {
	s := azurite(t)
	for _, c := range []struct {
		name     string
		duration int32
		broken   bool
		want     error
	}{
		{"infinite", -1, false, entry.ErrRefused},
		{"fixed", 15, false, entry.ErrThrottled},
		{"infinite, being broken", -1, true, entry.ErrThrottled},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, name := s.decider(t, "")
			tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w-0", entry.LeaderToken{}))
			lc, err := lease.NewBlobClient(s.rawBlob(t, name), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lc.AcquireLease(t.Context(), c.duration, nil); err != nil {
				t.Fatal(err)
			}
			if c.broken {
				period := int32(30)
				if _, err := lc.BreakLease(t.Context(), &lease.BlobBreakOptions{BreakPeriod: &period}); err != nil {
					t.Fatal(err)
				}
			}
			_, err = d.WriteEntry(t.Context(), faultproxy.Record(1, "w-1", tok))
			for _, other := range []error{entry.ErrRefused, entry.ErrThrottled, entry.ErrRaceLost} {
				if got := errors.Is(err, other); got != (other == c.want) {
					t.Fatalf("write to a blob under a %s lease: err = %v, want %v", c.name, err, c.want)
				}
			}
			if c.want == entry.ErrThrottled && !strings.Contains(err.Error(), "lease on the blob that ends") {
				t.Errorf("the error does not say a lease blocks the write: %v", err)
			}
			t.Logf("%s lease: %v", c.name, err)
			if got := faultproxy.MustRead(t, d); got.WriteID != "w-0" {
				t.Fatalf("read %+v after the write that was not applied, want w-0", got)
			}
			// Broken at once, which frees the blob in every state.
			now := int32(0)
			if _, err := lc.BreakLease(t.Context(), &lease.BlobBreakOptions{BreakPeriod: &now}); err != nil {
				t.Fatal(err)
			}
			faultproxy.MustWrite(t, d, faultproxy.Record(1, "w-1", tok))
		})
	}
}

// TestTokens: the token is the ETag the service reports, and carries the
// service's clock.
func TestTokens(t *testing.T) {
	s := azurite(t)
	d, _ := s.decider(t, "")
	before := time.Now().Add(-time.Minute)
	tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w-0", entry.LeaderToken{}))
	got := faultproxy.MustRead(t, d)
	if got.Token.Version != tok.Version {
		t.Errorf("read ETag %s, write returned %s", got.Token.Version, tok.Version)
	}
	for name, ct := range map[string]time.Time{"write": tok.CommitTime, "read": got.Token.CommitTime} {
		if ct.Before(before) || ct.After(time.Now().Add(time.Minute)) {
			t.Errorf("%s token CommitTime %v is not about now", name, ct)
		}
	}
	// Identical bodies get different ETags: Azure's ETags are not content
	// hashes, so a stale writer cannot match a newer identical record.
	tok2 := faultproxy.MustWrite(t, d, &entry.RaceEntry{ElectionNumber: got.ElectionNumber, Term: got.Term,
		LeaderID: got.LeaderID, TermExpiry: got.TermExpiry, WriteID: got.WriteID, Token: tok})
	if tok2.Version == tok.Version {
		t.Errorf("rewriting identical content kept ETag %s", tok.Version)
	}
}

// TestErrorsHideSASToken: neither a transport error nor a service answer
// repeats the SAS token of the client's URL.
func TestErrorsHideSASToken(t *testing.T) {
	const sig = "c2VjcmV0LXNpZ25hdHVyZQ%3D%3D"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	endpoints := []string{"http://" + dead + "/devstoreaccount1"}
	if s := maybeAzurite(t); s != nil {
		endpoints = append(endpoints, s.endpoint)
	}
	for _, ep := range endpoints {
		c, err := container.NewClientWithNoCredential(ep+"/elections?sv=2020-08-04&sp=rw&sig="+sig,
			&container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: noSDKRetries}})
		if err != nil {
			t.Fatal(err)
		}
		d, err := leazblob.NewDecider(c, "job", leazblob.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_, rerr := d.ReadCurrent(t.Context())
		_, werr := d.WriteEntry(t.Context(), faultproxy.Record(0, "w", entry.LeaderToken{}))
		for _, err := range []error{rerr, werr} {
			if err == nil {
				t.Fatalf("%s: a request with a bogus SAS succeeded", ep)
			}
			if strings.Contains(err.Error(), sig) || strings.Contains(err.Error(), "sig=") {
				t.Errorf("error repeats the SAS token: %v", err)
			}
			t.Logf("%s: %v", ep, err)
		}
	}
}

// TestDecidersShareNothing: two deciders on different blobs of a container
// do not see each other's records.
func TestDecidersShareNothing(t *testing.T) {
	s := azurite(t)
	a, _ := s.decider(t, "")
	b, _ := s.decider(t, "")
	faultproxy.MustWrite(t, a, faultproxy.Record(0, "w-a", entry.LeaderToken{}))
	if got := faultproxy.MustRead(t, b); got.ElectionNumber != entry.NoElections {
		t.Fatalf("other blob reads %+v", got)
	}
}
