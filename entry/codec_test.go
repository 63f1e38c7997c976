package entry_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
)

func sample() *entry.RaceEntry {
	return &entry.RaceEntry{
		ElectionNumber:   9,
		Term:             4,
		LeaderID:         "host/1/x",
		HostPort:         []string{"10.0.0.1:1"},
		ConnectionParams: []byte{0, 1, 2},
		TermExpiry:       time.Date(2030, 1, 1, 0, 0, 0, 5, time.UTC),
		Released:         true,
		WriteID:          "w",
		Lineage:          "l",
	}
}

// FuzzUnmarshal checks that no input makes Unmarshal panic, that everything
// it rejects wraps ErrCorruptRecord, and that what it accepts re-encodes to
// a record that decodes the same.
func FuzzUnmarshal(f *testing.F) {
	valid, err := entry.Marshal(sample())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{
		valid, valid[:len(valid)/2], {}, []byte("\n"), []byte("leaderelection-record v1 crc32c=00000000\n{}"),
		[]byte("leaderelection-record v99 crc32c=00000000\n{}"), bytes.Repeat([]byte("x"), 100),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := entry.Unmarshal(data)
		if err != nil {
			if !errors.Is(err, entry.ErrCorruptRecord) {
				t.Fatalf("error %v does not wrap ErrCorruptRecord", err)
			}
			return
		}
		again, err := entry.Marshal(e)
		if err != nil {
			t.Fatalf("accepted record does not re-encode: %v", err)
		}
		e2, err := entry.Unmarshal(again)
		if err != nil || !sameRecord(e2, e) {
			t.Fatalf("re-encoded record decodes as %+v, %v; want %+v", e2, err, e)
		}
	})
}

// sameRecord reports whether a and b hold the same record: every field
// Marshal encodes, the expiry as an instant.
func sameRecord(a, b *entry.RaceEntry) bool {
	return a.ElectionNumber == b.ElectionNumber && a.Term == b.Term && a.LeaderID == b.LeaderID &&
		slices.Equal(a.HostPort, b.HostPort) && bytes.Equal(a.ConnectionParams, b.ConnectionParams) &&
		a.TermExpiry.Equal(b.TermExpiry) && a.Released == b.Released && a.WriteID == b.WriteID && a.Lineage == b.Lineage
}

func TestRoundTripAndClone(t *testing.T) {
	want := sample()
	data, err := entry.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := entry.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRecord(got, want) {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	c := want.Clone()
	c.HostPort[0] = "changed"
	c.ConnectionParams[0] = 9
	if want.HostPort[0] == "changed" || want.ConnectionParams[0] == 9 {
		t.Error("Clone shares slices with the original")
	}
}

// framed returns body under a header of format version major with the
// body's true checksum, so that only what the header or body says can make
// Unmarshal refuse it.
func framed(major int, body string) []byte {
	sum := crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli))
	return fmt.Appendf(nil, "leaderelection-record v%d crc32c=%08x\n%s", major, sum, body)
}

// A record of a newer major version, or a body that is not a whole record,
// is refused even with a checksum that matches: never read as a version 1
// record, or as one numbered 0 with no leader.
func TestUnmarshalRefusesWhatIsNotARecord(t *testing.T) {
	valid, err := entry.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	body := string(valid[bytes.IndexByte(valid, '\n')+1:])
	if _, err := entry.Unmarshal(framed(1, body)); err != nil {
		t.Fatalf("a version 1 record framed here: %v", err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"newer major version", framed(2, body), "format version 2"},
		{"empty object", framed(1, "{}"), `no "election" field`},
		{"null", framed(1, "null"), "field"},
		{"no write id", framed(1, `{"election":9,"term":4,"leader":"a","expiry":"2030-01-01T00:00:00Z"}`), `no "writeID" field`},
		// json.Unmarshal leaves a field alone for null: it would read as
		// 0, or as an expiry long past (a record free at once).
		{"null numbers", framed(1, `{"election":null,"term":null,"leader":"a","expiry":"2030-01-01T00:00:00Z","writeID":"w"}`), `no "election" field`},
		{"null expiry", framed(1, `{"election":9,"term":4,"leader":"a","expiry": null ,"writeID":"w"}`), `no "expiry" field`},
		// json.Unmarshal would take either of these (the last of a
		// repeated field, a name in any case), where another reader
		// might take the other.
		{"repeated field", framed(1, `{"election":9,"term":4,"term":9,"leader":"a","expiry":"2030-01-01T00:00:00Z","writeID":"w"}`), `field "term" repeated`},
		{"field spelt in another case", framed(1, `{"election":9,"term":4,"Term":9,"leader":"a","expiry":"2030-01-01T00:00:00Z","writeID":"w"}`), `field "term" is spelt "Term"`},
		{"required field only in another case", framed(1, `{"election":9,"Term":4,"leader":"a","expiry":"2030-01-01T00:00:00Z","writeID":"w"}`), `spelt "Term"`},
		// json.Unmarshal would read it as U+FFFD: not what was written.
		{"invalid UTF-8", framed(1, "{\"election\":9,\"term\":4,\"leader\":\"a\xff\",\"expiry\":\"2030-01-01T00:00:00Z\",\"writeID\":\"w\"}"), "not valid UTF-8"},
	} {
		e, err := entry.Unmarshal(c.data)
		if !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s: Unmarshal = %+v, %v; want ErrCorruptRecord saying %q", c.name, e, err, c.want)
		}
	}
}

// A field a later minor version adds is left alone.
func TestUnmarshalIgnoresUnknownFields(t *testing.T) {
	e, err := entry.Unmarshal(framed(1, `{"election":9,"term":4,"leader":"a","expiry":"2030-01-01T00:00:00Z","writeID":"w","herd":7}`))
	if err != nil || e.Term != 4 || e.LeaderID != "a" {
		t.Fatalf("Unmarshal = %+v, %v; want term 4 led by a", e, err)
	}
}

// A record that cannot be encoded as it is wraps ErrRefused: it never will
// be, and must not be retried. Invalid UTF-8 would be written as U+FFFD, so
// that a leader would not know its own record.
func TestMarshalRefusesWhatItCannotKeep(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(e *entry.RaceEntry)
		want string
	}{
		{"LeaderID", func(e *entry.RaceEntry) { e.LeaderID = "host\xff" }, `LeaderID "host\xff" is not valid UTF-8`},
		{"HostPort", func(e *entry.RaceEntry) { e.HostPort = []string{"ok:1", "h\xc3:1"} }, "HostPort"},
		{"WriteID", func(e *entry.RaceEntry) { e.WriteID = "\xff" }, "WriteID"},
		{"Lineage", func(e *entry.RaceEntry) { e.Lineage = "\xff" }, "Lineage"},
		{"expiry beyond year 9999", func(e *entry.RaceEntry) { e.TermExpiry = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "year"},
		// Unmarshal would refuse them.
		{"negative numbers", func(e *entry.RaceEntry) { e.ElectionNumber, e.Term = -9, -9 }, "inconsistent numbers (election -9, term -9)"},
		{"term above the election number", func(e *entry.RaceEntry) { e.Term = e.ElectionNumber + 1 }, "inconsistent numbers"},
		// No backend would read it back (they read at most MaxSize).
		{"larger than MaxSize", func(e *entry.RaceEntry) { e.ConnectionParams = make([]byte, entry.MaxSize) }, "HostPort and ConnectionParams are too large"},
	} {
		e := sample()
		c.edit(e)
		data, err := entry.Marshal(e)
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s: Marshal = %q, %v; want ErrRefused saying %q", c.name, data, err, c.want)
		}
	}
}

// RFC 3339 has no seconds in a zone's offset: an expiry in a zone whose
// offset has them keeps its instant.
func TestExpiryInAZoneWithSecondsKeepsItsInstant(t *testing.T) {
	e := sample()
	e.TermExpiry = time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", -(4*3600+56*60+2)))
	data, err := entry.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := entry.Unmarshal(data)
	if err != nil || !got.TermExpiry.Equal(e.TermExpiry) {
		t.Fatalf("expiry %v read back as %v (%v)", e.TermExpiry, got.TermExpiry, err)
	}
}
