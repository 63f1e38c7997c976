package faultproxy

import (
	"context"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

// callTimeout bounds MustRead's and MustWrite's calls, so that a store that
// stops answering fails the test with the call named instead of hanging it.
const callTimeout = 10 * time.Second

// Faulty is a RaceDecider whose every request goes through a fault proxy,
// and one reaching the store directly, both on the same record.
type Faulty struct {
	Proxy  *Proxy
	D      leaderelection.RaceDecider // through Proxy
	Direct leaderelection.RaceDecider // straight to the store
}

// Record returns a record of election n, written by writeID, on tok, whose
// term ends in a minute.
func Record(n int64, writeID string, tok entry.LeaderToken) *entry.RaceEntry {
	return &entry.RaceEntry{
		ElectionNumber: n, Term: n, LeaderID: "leader-" + writeID,
		TermExpiry: time.Now().Add(time.Minute).UTC(), WriteID: writeID, Token: tok,
	}
}

// MustRead reads d's record, failing the test on an error.
func MustRead(t testing.TB, d leaderelection.RaceDecider) *entry.RaceEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	e, err := d.ReadCurrent(ctx)
	if err != nil {
		t.Fatalf("ReadCurrent: %v", err)
	}
	return e
}

// MustWrite writes e with d, failing the test on an error.
func MustWrite(t testing.TB, d leaderelection.RaceDecider, e *entry.RaceEntry) entry.LeaderToken {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	tok, err := d.WriteEntry(ctx, e)
	if err != nil {
		t.Fatalf("WriteEntry(%s): %v", e.WriteID, err)
	}
	return tok
}
