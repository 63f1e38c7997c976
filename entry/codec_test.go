package entry_test

import (
	"bytes"
	"errors"
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
