package entry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The encoding is a header line followed by a JSON body:
//
//	leaderelection-record v1 crc32c=0123abcd\n{...}
//
// The header names the format and its major version, so that a foreign object
// or a record from an incompatible future version is recognised instead of
// being read as an empty record, and the checksum catches truncation.
const (
	magic        = "leaderelection-record"
	formatMajor  = 1
	maxHeaderLen = 64
)

// MaxSize bounds an encoded record: Marshal refuses to make a larger one,
// and backends read no more than this (a record is a few hundred bytes; a
// larger object is not one). HostPort and ConnectionParams are all that can
// make a record large.
const MaxSize = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// wireEntry is the JSON body. Field names are short but stable: renaming one is
// a major version change.
type wireEntry struct {
	ElectionNumber   int64     `json:"election"`
	Term             int64     `json:"term"`
	LeaderID         string    `json:"leader"`
	HostPort         []string  `json:"hostPort,omitempty"`
	ConnectionParams []byte    `json:"connParams,omitempty"`
	TermExpiry       time.Time `json:"expiry"`
	Released         bool      `json:"released,omitempty"`
	WriteID          string    `json:"writeID"`
	Lineage          string    `json:"lineage,omitempty"`
}

// Marshal encodes e (all fields but Token) in the versioned, checksummed format
// every backend stores. Its errors wrap ErrRefused: a record that cannot be
// encoded never will be, so a write of it must end the campaign, not be
// retried.
func Marshal(e *RaceEntry) ([]byte, error) {
	// Unmarshal refuses what breaks these: never write what cannot be
	// read back.
	if e.ElectionNumber < 0 || e.Term < 0 || e.Term > e.ElectionNumber {
		return nil, fmt.Errorf("leaderelection: encoding record: inconsistent numbers (election %d, term %d): %w", e.ElectionNumber, e.Term, ErrRefused)
	}
	// encoding/json would write invalid UTF-8 as U+FFFD, so a leader would
	// not know its own record when it read it back.
	for _, f := range [][]string{{"LeaderID", e.LeaderID}, {"WriteID", e.WriteID}, {"Lineage", e.Lineage}} {
		if !utf8.ValidString(f[1]) {
			return nil, fmt.Errorf("leaderelection: encoding record: %s %q is not valid UTF-8: %w", f[0], f[1], ErrRefused)
		}
	}
	for _, hp := range e.HostPort {
		if !utf8.ValidString(hp) {
			return nil, fmt.Errorf("leaderelection: encoding record: HostPort %q is not valid UTF-8: %w", hp, ErrRefused)
		}
	}
	body, err := json.Marshal(wireEntry{
		ElectionNumber:   e.ElectionNumber,
		Term:             e.Term,
		LeaderID:         e.LeaderID,
		HostPort:         e.HostPort,
		ConnectionParams: e.ConnectionParams,
		// In UTC: RFC 3339 has no seconds in a zone's offset, so a zone
		// whose offset has them (local mean time, before 1900) would move
		// the instant.
		TermExpiry: e.TermExpiry.UTC(),
		Released:   e.Released,
		WriteID:    e.WriteID,
		Lineage:    e.Lineage,
	})
	if err != nil {
		return nil, fmt.Errorf("leaderelection: encoding record: %v: %w", err, ErrRefused)
	}
	out := fmt.Appendf(nil, "%s v%d crc32c=%08x\n", magic, formatMajor, crc32.Checksum(body, castagnoli))
	if len(out)+len(body) > MaxSize {
		// Written, it could not be read back: every candidate would
		// end its campaign on a record it cannot read.
		return nil, fmt.Errorf("leaderelection: encoding record: %d bytes, more than the %d a record may have (HostPort and ConnectionParams are too large): %w",
			len(out)+len(body), MaxSize, ErrRefused)
	}
	return append(out, body...), nil
}

// Unmarshal decodes a record written by Marshal. Anything else (empty,
// truncated, foreign, a newer major version) gives an error wrapping
// ErrCorruptRecord; it never panics. The returned entry has a zero Token.
func Unmarshal(data []byte) (*RaceEntry, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 || nl > maxHeaderLen {
		return nil, fmt.Errorf("%w: no %q header (%d bytes)", ErrCorruptRecord, magic, len(data))
	}
	header, body := data[:nl], data[nl+1:]
	fields := bytes.Fields(header)
	if len(fields) != 3 || string(fields[0]) != magic {
		return nil, fmt.Errorf("%w: no %q header (%d bytes)", ErrCorruptRecord, magic, len(data))
	}
	ver, ok := bytes.CutPrefix(fields[1], []byte("v"))
	major, err := strconv.Atoi(string(ver))
	if !ok || err != nil {
		return nil, fmt.Errorf("%w: bad version %q", ErrCorruptRecord, fields[1])
	}
	if major != formatMajor {
		return nil, fmt.Errorf("%w: format version %d, this library reads version %d", ErrCorruptRecord, major, formatMajor)
	}
	sumHex, ok := bytes.CutPrefix(fields[2], []byte("crc32c="))
	want, err := strconv.ParseUint(string(sumHex), 16, 32)
	if !ok || err != nil {
		return nil, fmt.Errorf("%w: bad checksum field %q", ErrCorruptRecord, fields[2])
	}
	if got := crc32.Checksum(body, castagnoli); got != uint32(want) {
		return nil, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x): truncated or altered", ErrCorruptRecord, want, got)
	}
	// Marshal writes valid UTF-8, which json.Unmarshal would otherwise
	// take in as U+FFFD.
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrCorruptRecord)
	}
	var w wireEntry
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	if err := checkKeys(body); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	if w.ElectionNumber < 0 || w.Term < 0 || w.Term > w.ElectionNumber {
		return nil, fmt.Errorf("%w: inconsistent numbers (election %d, term %d)", ErrCorruptRecord, w.ElectionNumber, w.Term)
	}
	return &RaceEntry{
		ElectionNumber:   w.ElectionNumber,
		Term:             w.Term,
		LeaderID:         w.LeaderID,
		HostPort:         w.HostPort,
		ConnectionParams: w.ConnectionParams,
		TermExpiry:       w.TermExpiry,
		Released:         w.Released,
		WriteID:          w.WriteID,
		Lineage:          w.Lineage,
	}, nil
}

// wireKeys are the body's field names: the required ones first.
var wireKeys = []string{"election", "term", "leader", "expiry", "writeID", "hostPort", "connParams", "released", "lineage"}

const requiredKeys = 5

// checkKeys checks the body's fields as json.Unmarshal cannot: Marshal writes
// the required ones always, never null, so a body without them ({}, null) or
// with null for one (which json.Unmarshal skips) is not a record and must not
// pass for one numbered 0 with no leader (a tenure written over it would
// restart the fencing tokens); and json.Unmarshal matches names in any case
// and lets the last of repeated fields win, so a field spelt another way or
// repeated would make the record read one way here and another elsewhere.
// Fields it does not know are left for a later minor version.
func checkKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("no %q field", wireKeys[0])
	}
	seen, set := map[string]bool{}, map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		for _, w := range wireKeys {
			if k != w && strings.EqualFold(k, w) {
				return fmt.Errorf("field %q is spelt %q", w, k)
			}
		}
		if seen[k] {
			return fmt.Errorf("field %q repeated", k)
		}
		seen[k], set[k] = true, string(v) != "null"
	}
	for _, k := range wireKeys[:requiredKeys] {
		if !set[k] {
			return fmt.Errorf("no %q field", k)
		}
	}
	return nil
}
