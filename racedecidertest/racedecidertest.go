// Package racedecidertest is the conformance suite every RaceDecider runs.
// The in-tree backends run it; run it on your own backend too:
//
//	func TestConformance(t *testing.T) {
//		racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
//			return mybackend.NewDecider(freshObjectName(t))
//		})
//	}
package racedecidertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

// Concurrency sets how many writers race in the concurrency checks, and Rounds
// how many rounds they race. Backends against a slow server may lower them.
var (
	Concurrency = 16
	Rounds      = 10
)

// Run checks that the RaceDecider returned by newDecider keeps the contract
// documented on leaderelection.RaceDecider (and ChangeNotifier, when it
// implements it). Every call of newDecider must return a decider on a new,
// empty election that no other call shares.
//
// Its writers race through one client. A backend should also race separate
// clients of one object (RaceWriters), check with its store's own fault
// injection that a write whose answer was lost is never reported as a lost
// race, and check with its store's own delete what a deletion of the record
// does (CheckDeleted): Run can do none of these.
func Run(t *testing.T, newDecider func(t *testing.T) leaderelection.RaceDecider) {
	t.Helper()
	checks := []struct {
		name string
		fn   func(t *testing.T, d leaderelection.RaceDecider)
	}{
		{"MissingRecordReadsAsNoElections", missingRecord},
		{"FirstWriteOnEmptyStore", firstWrite},
		{"CreateLosesWhenRecordExists", createLosesWhenExists},
		{"StaleTokenLoses", staleTokenLoses},
		{"StaleWriterWithIdenticalBodyLoses", staleIdenticalBodyLoses},
		{"EveryFieldRoundTrips", everyFieldRoundTrips},
		{"EmptyFieldsRoundTrip", emptyFieldsRoundTrip},
		{"ConcurrentWritersOneWinnerPerRound", concurrentWriters},
		{"ElectionNumbersStrictlyIncrease", electionNumbersIncrease},
		{"CommitTimes", commitTimes},
		{"CancelledContext", cancelledContext},
	}
	// The push check applies only to backends that can push.
	if _, push := newDecider(t).(leaderelection.ChangeNotifier); push {
		checks = append(checks, struct {
			name string
			fn   func(t *testing.T, d leaderelection.RaceDecider)
		}{"ChangeNotifier", changeNotifier})
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newDecider(t)) })
	}
}

// framed returns body under a record header of format version major with
// the body's true checksum, so that only what the header or body says can
// make a decoder refuse it.
func framed(major int, body []byte) []byte {
	sum := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
	return append(fmt.Appendf(nil, "leaderelection-record v%d crc32c=%08x\n", major, sum), body...)
}

// CheckCorrupt stores foreign and damaged content as the record behind d
// through setRaw (which writes raw bytes to the backing object, outside the
// backend), and checks that ReadCurrent reports each as an error wrapping
// entry.ErrCorruptRecord whose text names the object (objectName, such as
// "gs://bucket/object"), without panicking.
func CheckCorrupt(t *testing.T, d leaderelection.RaceDecider, setRaw func(t *testing.T, data []byte), objectName string) {
	t.Helper()
	valid, err := entry.Marshal(sampleEntry(3, "w-corrupt"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":          {},
		"garbage":        []byte("\x00\xffnot a record at all\x01"),
		"json-only":      []byte(`{"election":1,"term":1,"leader":"x"}`),
		"truncated":      valid[:len(valid)-5],
		"altered":        append(slices.Clone(valid[:len(valid)-2]), '9', '}'),
		"newer-version":  framed(2, valid[bytes.IndexByte(valid, '\n')+1:]),
		"header-no-body": []byte("leaderelection-record v1 crc32c=00000000\n"),
		"empty-body":     framed(1, []byte("{}")),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			setRaw(t, data)
			e, err := d.ReadCurrent(t.Context())
			if err == nil {
				t.Fatalf("ReadCurrent of %s content returned %+v and no error", name, e)
			}
			if !errors.Is(err, entry.ErrCorruptRecord) {
				t.Errorf("ReadCurrent error %q does not wrap entry.ErrCorruptRecord", err)
			}
			if !strings.Contains(err.Error(), objectName) {
				t.Errorf("ReadCurrent error %q does not name the object %q", err, objectName)
			}
		})
	}
}

var base = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)

// engineTerm is a Term of the size the engine writes: it numbers a record it
// creates from the time in Unix microseconds (here base's, about 1.9e15),
// so that a backend that keeps numbers in 32 bits fails every check, not
// only the round trips.
var engineTerm = base.UnixMicro()

// number is the ElectionNumber (and Term) of sample record n.
func number(n int64) int64 { return engineTerm + n }

// sampleEntry returns record n, with the numbers and the text (LeaderID and
// HostPort are what users choose, in any script) a real election writes.
func sampleEntry(n int64, writeID string) *entry.RaceEntry {
	return &entry.RaceEntry{
		ElectionNumber:   number(n),
		Term:             number(n),
		LeaderID:         "候補-ü-😀/" + writeID,
		HostPort:         []string{"10.0.0.1:8080", "[::1]:8080", "ノード.example:8080"},
		ConnectionParams: []byte(`{"loadBalancingConfig":[{"pick_first":{}}]}`),
		TermExpiry:       base.Add(time.Duration(n) * time.Second),
		WriteID:          writeID,
	}
}

func read(t *testing.T, d leaderelection.RaceDecider) *entry.RaceEntry {
	t.Helper()
	e, err := d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatalf("ReadCurrent: %v", err)
	}
	if e == nil {
		t.Fatal("ReadCurrent returned a nil entry and no error")
	}
	return e
}

// write writes e conditioned on tok and fails the test unless it succeeds.
func write(t *testing.T, d leaderelection.RaceDecider, e *entry.RaceEntry, tok entry.LeaderToken) entry.LeaderToken {
	t.Helper()
	e.Token = tok
	nt, err := d.WriteEntry(t.Context(), e)
	if err != nil {
		t.Fatalf("WriteEntry(election %d, conditioned on %+v): %v", e.ElectionNumber, tok, err)
	}
	if nt.IsZero() {
		t.Fatalf("WriteEntry(election %d) succeeded but returned a zero token", e.ElectionNumber)
	}
	return nt
}

func missingRecord(t *testing.T, d leaderelection.RaceDecider) {
	e := read(t, d)
	if e.ElectionNumber != entry.NoElections {
		t.Errorf("ElectionNumber of a missing record = %d, want entry.NoElections (%d)", e.ElectionNumber, entry.NoElections)
	}
	if !e.Token.IsZero() {
		t.Errorf("Token of a missing record = %+v, want zero", e.Token)
	}
}

func firstWrite(t *testing.T, d leaderelection.RaceDecider) {
	tok := write(t, d, sampleEntry(0, "w-first"), entry.LeaderToken{})
	got := read(t, d)
	if got.Token.Version != tok.Version {
		t.Errorf("read token %q, WriteEntry returned %q", got.Token.Version, tok.Version)
	}
	if got.WriteID != "w-first" || got.ElectionNumber != number(0) {
		t.Errorf("read back %+v, want election %d with write id w-first", got, number(0))
	}
}

func createLosesWhenExists(t *testing.T, d leaderelection.RaceDecider) {
	write(t, d, sampleEntry(0, "w-a"), entry.LeaderToken{})
	e := sampleEntry(0, "w-b")
	_, err := d.WriteEntry(t.Context(), e)
	if !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("create over an existing record: err = %v, want entry.ErrRaceLost", err)
	}
	if got := read(t, d); got.WriteID != "w-a" {
		t.Errorf("losing create overwrote the record: write id %q, want w-a", got.WriteID)
	}
}

func staleTokenLoses(t *testing.T, d leaderelection.RaceDecider) {
	t1 := write(t, d, sampleEntry(0, "w-0"), entry.LeaderToken{})
	write(t, d, sampleEntry(1, "w-1"), t1)
	stale := sampleEntry(1, "w-stale")
	stale.Token = t1
	_, err := d.WriteEntry(t.Context(), stale)
	if !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("write on a stale token: err = %v, want entry.ErrRaceLost", err)
	}
	if got := read(t, d); got.WriteID != "w-1" {
		t.Errorf("stale write changed the record: write id %q, want w-1", got.WriteID)
	}
}

// staleIdenticalBodyLoses guards against backends whose version is derived
// from the content (an S3 ETag is the MD5 of the body). Two records alike in
// every field but the write id must get different tokens, so that a stale
// writer holding the first token loses once the second record is stored.
func staleIdenticalBodyLoses(t *testing.T, d leaderelection.RaceDecider) {
	first := sampleEntry(1, "w-first")
	t1 := write(t, d, first.Clone(), entry.LeaderToken{})
	second := first.Clone()
	second.WriteID = "w-second"
	t2 := write(t, d, second, t1)
	if t2.Version == t1.Version {
		t.Fatalf("two records differing only by write id got the same token %q", t1.Version)
	}
	stale := first.Clone()
	stale.Token = t1
	if _, err := d.WriteEntry(t.Context(), stale); !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("write conditioned on a replaced token: err = %v, want entry.ErrRaceLost", err)
	}
	if got := read(t, d); got.WriteID != "w-second" {
		t.Errorf("stale write changed the record: write id %q, want w-second", got.WriteID)
	}
}

func sameEntry(got, want *entry.RaceEntry) error {
	switch {
	case got.ElectionNumber != want.ElectionNumber:
		return fmt.Errorf("field ElectionNumber = %d, want %d", got.ElectionNumber, want.ElectionNumber)
	case got.Term != want.Term:
		return fmt.Errorf("field Term = %d, want %d", got.Term, want.Term)
	case got.LeaderID != want.LeaderID:
		return fmt.Errorf("field LeaderID = %q, want %q", got.LeaderID, want.LeaderID)
	case !slices.Equal(got.HostPort, want.HostPort):
		return fmt.Errorf("field HostPort = %q, want %q", got.HostPort, want.HostPort)
	case string(got.ConnectionParams) != string(want.ConnectionParams):
		return fmt.Errorf("field ConnectionParams = %q, want %q", got.ConnectionParams, want.ConnectionParams)
	case !got.TermExpiry.Equal(want.TermExpiry):
		return fmt.Errorf("field TermExpiry = %v, want %v", got.TermExpiry, want.TermExpiry)
	case got.Released != want.Released:
		return fmt.Errorf("field Released = %v, want %v", got.Released, want.Released)
	case got.WriteID != want.WriteID:
		return fmt.Errorf("field WriteID = %q, want %q", got.WriteID, want.WriteID)
	case got.Lineage != want.Lineage:
		return fmt.Errorf("field Lineage = %q, want %q", got.Lineage, want.Lineage)
	}
	return nil
}

// everyFieldRoundTrips writes records whose every field is set, the second
// over the first, and reads each back. The numbers are those the engine
// writes (Unix microseconds, beyond 32 bits) and the largest the encoding
// holds: a Term above 2^53, which a store that keeps numbers as doubles
// rounds, and the largest int64. LeaderID and HostPort are valid UTF-8 well
// outside ASCII (accents, CJK, an emoji outside the Basic Multilingual
// Plane), which a store that is not UTF-8 throughout mangles.
func everyFieldRoundTrips(t *testing.T, d leaderelection.RaceDecider) {
	cases := []struct {
		name string
		want *entry.RaceEntry
	}{
		{"engine_numbers", &entry.RaceEntry{
			ElectionNumber:   engineTerm + 7,
			Term:             engineTerm + 5,
			LeaderID:         "host-a/1234/6f1e",
			HostPort:         []string{"10.1.2.3:443", "[2001:db8::1]:443", "leader.example:8443"},
			ConnectionParams: []byte{0, 1, 2, 0xfe, 0xff, '{', '"'},
			TermExpiry:       time.Date(2031, 6, 7, 8, 9, 10, 987654321, time.FixedZone("X", 3600)),
			Released:         true,
			WriteID:          "w-roundtrip",
			Lineage:          "l-roundtrip",
		}},
		{"encoding_limits", &entry.RaceEntry{
			ElectionNumber:   math.MaxInt64,
			Term:             1<<53 + 1,
			LeaderID:         "候補-ü-😀 \"élu\"",
			HostPort:         []string{"ノード.example:8443", "[2001:db8::1]:443", "bücher.example:443"},
			ConnectionParams: []byte("{\"name\":\"候補\"}\x00\xff"),
			TermExpiry:       time.Date(2031, 6, 7, 8, 9, 11, 1, time.UTC),
			WriteID:          "w-limits",
			Lineage:          "l-roundtrip",
		}},
	}
	var tok entry.LeaderToken
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok = write(t, d, c.want.Clone(), tok)
			got := read(t, d)
			if err := sameEntry(got, c.want); err != nil {
				t.Errorf("record did not round-trip: %v", err)
			}
			if got.Token.Version != tok.Version {
				t.Errorf("read token %q, WriteEntry returned %q", got.Token.Version, tok.Version)
			}
		})
	}
}

func emptyFieldsRoundTrip(t *testing.T, d leaderelection.RaceDecider) {
	want := &entry.RaceEntry{ElectionNumber: 0, Term: 0, LeaderID: "x", TermExpiry: base, WriteID: "w"}
	write(t, d, want.Clone(), entry.LeaderToken{})
	got := read(t, d)
	if err := sameEntry(got, want); err != nil {
		t.Errorf("record with empty fields did not round-trip: %v", err)
	}
	if len(got.HostPort) != 0 || len(got.ConnectionParams) != 0 {
		t.Errorf("empty HostPort/ConnectionParams read back as %q / %q", got.HostPort, got.ConnectionParams)
	}
}

// RaceWriters has one writer per decider in ds race to write the record:
// first to create it, then rounds times to replace it, all conditioned on the
// same token. It checks that exactly one writer wins each time and that the
// store holds the winner's record. The deciders may all be one Decider, or
// separate clients of the same object (a harder test: separate connections).
func RaceWriters(t *testing.T, ds []leaderelection.RaceDecider, rounds int) {
	t.Helper()
	var tok entry.LeaderToken
	for round := 0; round <= rounds; round++ {
		winners := race(t, ds, int64(round), tok, round)
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %q among %d writers conditioned on one token (%q), want exactly 1",
				round, len(winners), winners, len(ds), tok.Version)
		}
		got := read(t, ds[0])
		if got.WriteID != winners[0] {
			t.Fatalf("round %d: stored write id %q, but the winner was %q", round, got.WriteID, winners[0])
		}
		tok = got.Token
	}
}

// race has one writer per decider write concurrently conditioned on tok and
// returns the write ids of the winners, failing on any error other than a
// lost race.
func race(t *testing.T, ds []leaderelection.RaceDecider, next int64, tok entry.LeaderToken, round int) []string {
	t.Helper()
	var (
		mu      sync.Mutex
		winners []string
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for i, d := range ds {
		wg.Go(func() {
			e := sampleEntry(next, fmt.Sprintf("w-r%d-c%d", round, i))
			e.Token = tok
			<-start
			_, err := d.WriteEntry(t.Context(), e)
			switch {
			case err == nil:
				mu.Lock()
				winners = append(winners, e.WriteID)
				mu.Unlock()
			case !errors.Is(err, entry.ErrRaceLost):
				t.Errorf("round %d writer %d: %v (want success or entry.ErrRaceLost)", round, i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return winners
}

// concurrentWriters races Concurrency writers sharing d for Rounds rounds,
// the first of which creates the record.
func concurrentWriters(t *testing.T, d leaderelection.RaceDecider) {
	RaceWriters(t, slices.Repeat([]leaderelection.RaceDecider{d}, Concurrency), Rounds)
}

func electionNumbersIncrease(t *testing.T, d leaderelection.RaceDecider) {
	var tok entry.LeaderToken
	seen := map[string]bool{}
	for n := int64(0); n < 5; n++ {
		tok = write(t, d, sampleEntry(n, fmt.Sprintf("w-%d", n)), tok)
		if seen[tok.Version] {
			t.Fatalf("write %d reused token %q", n, tok.Version)
		}
		seen[tok.Version] = true
		if got := read(t, d); got.ElectionNumber != number(n) {
			t.Fatalf("after write %d read election %d, want %d", n, got.ElectionNumber, number(n))
		}
	}
}

func cancelledContext(t *testing.T, d leaderelection.RaceDecider) {
	tok := write(t, d, sampleEntry(0, "w-0"), entry.LeaderToken{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.ReadCurrent(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadCurrent with a cancelled context: err = %v, want context.Canceled", err)
	}
	e := sampleEntry(1, "w-cancelled")
	e.Token = tok
	if _, err := d.WriteEntry(ctx, e); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteEntry with a cancelled context: err = %v, want context.Canceled", err)
	}
	if got := read(t, d); got.WriteID != "w-0" {
		t.Errorf("a write with a context cancelled before the call was applied: write id %q", got.WriteID)
	}
}
