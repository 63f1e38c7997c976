package leaderelection

import (
	"context"

	"github.com/racedecider/leaderelection/entry"
)

// ErrRaceLost is returned by a RaceDecider's WriteEntry when another writer got
// there first. It is entry.ErrRaceLost, repeated here for callers of the engine.
var ErrRaceLost = entry.ErrRaceLost

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
	// the object. When ctx ends before the read completes it must return an
	// error wrapping ctx.Err().
	ReadCurrent(ctx context.Context) (*entry.RaceEntry, error)

	// WriteEntry stores rentry if and only if the stored record is still the
	// one identified by rentry.Token (a zero Token: if no record exists), and
	// returns the new record's token.
	//
	// Of any number of concurrent writes conditioned on the same token,
	// exactly one may succeed; the others must return an error wrapping
	// entry.ErrRaceLost. Any other error means the outcome is unknown: the
	// write may or may not have been applied, and the engine resolves that
	// by reading back rentry.WriteID. Writes must never be implemented as
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
	// ctx.Err().
	WaitForChange(ctx context.Context, token entry.LeaderToken) (*entry.RaceEntry, error)
}
