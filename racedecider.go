package leaderelection

import (
	"context"
	"time"

	"github.com/racedecider/leaderelection/entry"
)

// ErrRaceLost is returned by a RaceDecider's WriteEntry when another writer got
// there first. It is entry.ErrRaceLost, repeated here for callers of the engine.
var ErrRaceLost = entry.ErrRaceLost

// ErrThrottled and ErrRefused are the two kinds of refusal a backend reports:
// one that heals by slowing down, and one that does not. They are
// entry.ErrThrottled and entry.ErrRefused, repeated here for convenience.
var (
	ErrThrottled = entry.ErrThrottled
	ErrRefused   = entry.ErrRefused
)

// ErrCorruptRecord is wrapped by every error about a stored record that does
// not decode. It is entry.ErrCorruptRecord, repeated here for convenience.
var ErrCorruptRecord = entry.ErrCorruptRecord

// RaceDecider is the storage a leader election runs on: one record, read whole
// and replaced whole by a conditional write. It holds no engine state, does no
// logging and knows nothing of identities; the engine does all of that.
//
// Implementations must be safe for concurrent use. The package
// racedecidertest checks every rule below; run it on any new backend.
type RaceDecider interface {
	// ReadCurrent returns the stored record with its Token filled in.
	//
	// When no record exists it must return a RaceEntry with ElectionNumber
	// entry.NoElections, a zero Token and a nil error. A record that does not
	// decode must give an error wrapping entry.ErrCorruptRecord that names
	// the object. A throttled or refused read wraps entry.ErrThrottled or
	// entry.ErrRefused as WriteEntry's errors do; a missing bucket, table
	// or directory is a refusal, never a missing record. When ctx ends
	// before the read completes it must return an error wrapping ctx.Err().
	ReadCurrent(ctx context.Context) (*entry.RaceEntry, error)

	// WriteEntry stores rentry if and only if the stored record is still the
	// one identified by rentry.Token (a zero Token: if no record exists), and
	// returns the new record's token.
	//
	// Of any number of concurrent writes conditioned on the same token,
	// exactly one may succeed; the others must return an error wrapping
	// entry.ErrRaceLost. Every error falls in one of four classes, which
	// the backend must tell apart from its store's answers:
	//
	//   - entry.ErrRaceLost: the condition failed; not applied.
	//   - entry.ErrThrottled: the store asked to slow down; not applied.
	//     The engine backs off and tries again.
	//   - entry.ErrRefused: the store refused for good (permission denied,
	//     missing bucket or table, read-only); not applied. Acquire ends.
	//   - anything else: the outcome is unknown (timeout, reset, 5xx): the
	//     write may or may not have been applied, and the engine resolves
	//     that by reading back rentry.WriteID.
	//
	// Wrap ErrThrottled or ErrRefused only when the store's answer proves
	// the write was not applied. Writes must never be implemented as
	// deletes: a release is an ordinary conditional write.
	WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error)
}

// ChangeNotifier is an optional capability of a RaceDecider whose store can
// push changes. Config.Acquire and WatchConfig.Watch use it, when present, to
// learn of a release or a new leader at once instead of polling.
type ChangeNotifier interface {
	// WaitForChange blocks until the stored record is no longer the one
	// identified by token, then returns the record that replaced it, as
	// ReadCurrent would. It returns at once if the record has already
	// changed. When ctx ends first it must return an error wrapping
	// ctx.Err() if it watched for changes from the call on, which
	// vouches that none came, and an error that does not wrap it if it
	// could not (its channel was not up yet, say), so that the caller
	// reads instead.
	WaitForChange(ctx context.Context, token entry.LeaderToken) (*entry.RaceEntry, error)
}

// WriteSpacer is an optional capability of a RaceDecider whose store takes
// only so many writes to one record: Cloud Storage answers 429 to more than
// about one write per second to one object. Config.Acquire then sends no
// write sooner than MinWriteInterval after the record's current version was
// committed, as far as it can tell (when it learnt of the version, or its
// commit time placed on this host's clock, or, for a release, when the
// released record says it was sent, on the releasing leader's clock, and a
// round trip), so that every candidate together keeps to the rate: an
// acquisition waits, then reads again before writing, as another candidate
// may have written meanwhile; a release or an extension waits when its term
// leaves time for it. A throttled write is tried again no sooner than
// MinWriteInterval later.
type WriteSpacer interface {
	MinWriteInterval() time.Duration
}
