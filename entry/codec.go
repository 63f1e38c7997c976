package entry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strconv"
	"time"
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
// every backend stores.
func Marshal(e *RaceEntry) ([]byte, error) {
	body, err := json.Marshal(wireEntry{
		ElectionNumber:   e.ElectionNumber,
		Term:             e.Term,
		LeaderID:         e.LeaderID,
		HostPort:         e.HostPort,
		ConnectionParams: e.ConnectionParams,
		TermExpiry:       e.TermExpiry,
		Released:         e.Released,
		WriteID:          e.WriteID,
		Lineage:          e.Lineage,
	})
	if err != nil {
		return nil, fmt.Errorf("leaderelection: encoding record: %w", err)
	}
	out := fmt.Appendf(nil, "%s v%d crc32c=%08x\n", magic, formatMajor, crc32.Checksum(body, castagnoli))
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
	var w wireEntry
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	// Marshal writes these always, never null: a body without them ({},
	// null) or with null for one (which json.Unmarshal skips) is not a
	// record, and must not pass for one numbered 0 with no leader (a
	// tenure written over it would restart the fencing tokens).
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	for _, k := range []string{"election", "term", "leader", "expiry", "writeID"} {
		if v, ok := keys[k]; !ok || string(bytes.TrimSpace(v)) == "null" {
			return nil, fmt.Errorf("%w: no %q field", ErrCorruptRecord, k)
		}
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
