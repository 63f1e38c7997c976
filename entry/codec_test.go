package entry_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
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
		if err != nil || e2.ElectionNumber != e.ElectionNumber || e2.WriteID != e.WriteID || !e2.TermExpiry.Equal(e.TermExpiry) {
			t.Fatalf("re-encoded record decodes as %+v, %v; want %+v", e2, err, e)
		}
	})
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
	if got.Term != want.Term || got.LeaderID != want.LeaderID || !got.TermExpiry.Equal(want.TermExpiry) ||
		!got.Released || !bytes.Equal(got.ConnectionParams, want.ConnectionParams) || got.HostPort[0] != want.HostPort[0] ||
		got.Lineage != want.Lineage {
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
	} {
		e, err := entry.Unmarshal(c.data)
		if !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s: Unmarshal = %+v, %v; want ErrCorruptRecord saying %q", c.name, e, err, c.want)
		}
	}
}
