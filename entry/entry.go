// Package entry holds the election record and the errors every backend shares.
//
// It is a leaf package: backends import it, never the engine, so a backend can
// be written and tested without the leader-election logic.
package entry

import (
	"bytes"
	"errors"
	"slices"
	"time"
)

// NoElections is the ElectionNumber of an election whose record does not exist
// yet. A backend's ReadCurrent returns a RaceEntry with this number (and a zero
// Token) when the object is missing.
const NoElections int64 = -1

// ErrRaceLost is returned (possibly wrapped) by a backend's WriteEntry when the
// stored record is no longer the one the write was conditioned on: another
// writer got there first. It is the expected outcome of losing an election, not
// a failure. Check for it with errors.Is.
var ErrRaceLost = errors.New("leaderelection: lost race: the record changed since it was read")

// ErrThrottled is wrapped by a backend's error when the store refused a
// request because it came too fast (HTTP 429, S3's 503 SlowDown, GCS's limit
// of about one write per second per object, DynamoDB's throughput
// exceptions). The request was not applied: the engine does not read a
// throttled write back, it waits with exponential backoff and tries again.
var ErrThrottled = errors.New("leaderelection: throttled by the store")

// ErrRefused is wrapped by a backend's error when the store refused a request
// definitely and will refuse it again: permission denied, a missing bucket,
// container or table, a read-only file system, an endpoint that is not the
// store; Marshal's errors wrap it too, for a record that cannot be encoded.
// The request was not applied. The engine never reads a refused write
// back and never retries it: Acquire ends with the error, which must name
// the store and the object.
var ErrRefused = errors.New("leaderelection: refused by the store")

// ErrCorruptRecord is wrapped by every error reporting a stored record that does
// not decode: truncated, foreign, failing its checksum, or written by a newer
// major version of this library. Backends wrap it with the object's name.
var ErrCorruptRecord = errors.New("leaderelection: corrupt election record")

// LeaderToken is a backend's version of one stored record: the GCS generation,
// the S3 ETag, a row version. A write is conditioned on the token of the record
// it replaces; the zero LeaderToken stands for "no record exists".
type LeaderToken struct {
	// Version is opaque to everything but the backend that made it.
	Version string
	// CommitTime is the store's own clock reading when it accepted the write,
	// or zero when the backend does not report one. It lets a caller compare
	// its clock with the store's.
	CommitTime time.Time
}

// IsZero reports whether t stands for a record that does not exist.
func (t LeaderToken) IsZero() bool { return t.Version == "" }

// SameVersion reports whether t and o identify the same stored record. Only
// the Version counts: a store may report one record's CommitTime at different
// precision on a write and on a read.
func (t LeaderToken) SameVersion(o LeaderToken) bool { return t.Version == o.Version }

// RaceEntry is the election record. The leaderelection package's
// documentation describes the protocol that reads and writes it.
type RaceEntry struct {
	// ElectionNumber goes up by one on every successful write (acquisition,
	// extension, release). NoElections means no record exists.
	ElectionNumber int64
	// Term is the fencing token: the ElectionNumber of the write that began
	// the current holder's tenure. Extensions keep it; every new tenure has a
	// strictly greater one. Downstream systems should reject work carrying a
	// Term smaller than the largest they have seen.
	Term int64
	// LeaderID identifies the holder; unique per process incarnation.
	LeaderID string
	// HostPort lists the addresses at which clients reach the holder.
	HostPort []string
	// ConnectionParams is an opaque payload for clients (legrpc stores a gRPC
	// service config in it).
	ConnectionParams []byte
	// TermExpiry is when the tenure ends unless extended, on the writer's clock.
	TermExpiry time.Time
	// Released is set when the holder has stopped acting as leader; anyone
	// may acquire without waiting for TermExpiry.
	Released bool
	// WriteID is random per write attempt, so that a writer can recognise its
	// own write after an ambiguous outcome.
	WriteID string
	// Lineage is random per record created where none existed, and every
	// later record keeps it: two records with different Lineages mean that
	// the record was deleted and created again between them, even where no
	// read saw it missing. Empty in records written by versions before it.
	Lineage string

	// Token is the backend's version of this record. ReadCurrent fills it in;
	// WriteEntry conditions the write on it. It is not part of the encoding.
	Token LeaderToken
}

// Clone returns a deep copy of e, so that a caller may keep a record while the
// engine or a backend goes on using its own.
func (e *RaceEntry) Clone() *RaceEntry {
	if e == nil {
		return nil
	}
	c := *e
	c.HostPort = slices.Clone(e.HostPort)
	c.ConnectionParams = bytes.Clone(e.ConnectionParams)
	return &c
}

// NewerThan reports whether e was written after o: a higher Term, or the same
// tenure at a higher ElectionNumber. Terms rise across a deletion too, so a
// record written after one is newer even where its ElectionNumber is not.
// This is the order in which Watch reports records.
func (e *RaceEntry) NewerThan(o *RaceEntry) bool {
	return e.Term > o.Term || e.Term == o.Term && e.ElectionNumber > o.ElectionNumber
}
