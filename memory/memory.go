// Package memory is an in-process RaceDecider for tests, examples and
// candidates that all live in one process. It pushes every change to waiting
// candidates and watchers, so elections on it hand over without polling.
//
// A Decider keeps its record in memory: it is lost with the process and shared
// only by the goroutines holding the same *Decider.
package memory

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/racedecider/leaderelection/entry"
)

// Decider is a RaceDecider and ChangeNotifier held in memory. The zero value
// is not usable; call NewDecider. It is safe for concurrent use.
type Decider struct {
	mu sync.Mutex
	// stored is the encoded record, so that every read returns a fresh copy
	// and the encoding is exercised as it is with real stores.
	stored  []byte
	version int64
	commit  time.Time
	// changed is closed and replaced on every write, waking every waiter.
	changed chan struct{}
	name    string
}

// NewDecider returns an empty Decider: reads report entry.NoElections until
// the first write.
func NewDecider() *Decider {
	return &Decider{changed: make(chan struct{}), name: "memory"}
}

// String names the Decider in the engine's errors, logs and metrics:
// "mem://NAME" for one opened from that URL, else "memory".
func (d *Decider) String() string { return d.name }

// ReadCurrent implements leaderelection.RaceDecider.
func (d *Decider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: read: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.currentLocked()
}

func (d *Decider) currentLocked() (*entry.RaceEntry, error) {
	if d.stored == nil {
		return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
	}
	e, err := entry.Unmarshal(d.stored)
	if err != nil {
		return nil, fmt.Errorf("%s: record v%d: %w", d.name, d.version, err)
	}
	e.Token = d.tokenLocked()
	return e, nil
}

func (d *Decider) tokenLocked() entry.LeaderToken {
	if d.stored == nil {
		return entry.LeaderToken{}
	}
	return entry.LeaderToken{Version: strconv.FormatInt(d.version, 10), CommitTime: d.commit}
}

// WriteEntry implements leaderelection.RaceDecider.
func (d *Decider) WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error) {
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("memory: write: %w", err)
	}
	body, err := entry.Marshal(rentry)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("memory: write: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.tokenLocked(); cur.Version != rentry.Token.Version {
		return entry.LeaderToken{}, fmt.Errorf("memory: write conditioned on version %q, stored version %q: %w",
			rentry.Token.Version, cur.Version, entry.ErrRaceLost)
	}
	d.storeLocked(body)
	return d.tokenLocked(), nil
}

// WaitForChange implements leaderelection.ChangeNotifier.
func (d *Decider) WaitForChange(ctx context.Context, token entry.LeaderToken) (*entry.RaceEntry, error) {
	for {
		d.mu.Lock()
		if d.tokenLocked().Version != token.Version {
			defer d.mu.Unlock()
			return d.currentLocked()
		}
		changed := d.changed
		d.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			// A change and the end of ctx can come together: ctx's
			// error would vouch that none came.
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.tokenLocked().Version != token.Version {
				return d.currentLocked()
			}
			return nil, fmt.Errorf("memory: wait for change: %w", ctx.Err())
		}
	}
}

// SetRaw stores data as the record, bypassing the encoding, so that tests can
// check how the engine handles a corrupt or foreign record. It counts as a
// write: waiters wake and the version changes.
func (d *Decider) SetRaw(data []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.storeLocked(append([]byte{}, data...))
}

// Delete removes the record, as an operator or a bucket lifecycle rule might
// delete the object, so that tests can check what deletion does. Waiters
// wake; reads report entry.NoElections until the next write.
func (d *Decider) Delete() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.storeLocked(nil)
}

func (d *Decider) storeLocked(body []byte) {
	d.stored = body
	d.version++
	d.commit = time.Now()
	close(d.changed)
	d.changed = make(chan struct{})
}
