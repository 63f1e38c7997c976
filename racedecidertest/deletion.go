package racedecidertest

import (
	"context"
	"errors"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

// CheckDeleted checks what becomes of the record behind d when del deletes
// it, outside the backend, as an operator or a lifecycle rule might (the
// engine never deletes). The record then reads as missing, and a writer
// still holding the token it read before the deletion loses: its write
// neither succeeds nor creates the record again, even once someone else has
// created a new one, on a store whose own version numbers restart with the
// object (a DynamoDB item's counter) or whose token is derived from the
// record's numbers. A backend that can push changes returns the missing
// record to a waiter on the deleted one's token (or says it cannot tell)
// instead of blocking.
//
// Run cannot check this: RaceDecider has no delete. Backends call
// CheckDeleted with their store's own delete, as they call CheckCorrupt
// with their raw writes.
func CheckDeleted(t *testing.T, d leaderelection.RaceDecider, del func(t *testing.T)) {
	t.Helper()
	held := write(t, d, sampleEntry(0, "w-deleted"), entry.LeaderToken{})
	del(t)
	if got := read(t, d); got.ElectionNumber != entry.NoElections || !got.Token.IsZero() {
		t.Fatalf("ReadCurrent after the record was deleted = %+v; want entry.NoElections with a zero token", got)
	}
	if n, ok := d.(leaderelection.ChangeNotifier); ok {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		got, err := n.WaitForChange(ctx, held)
		late := ctx.Err() != nil
		cancel()
		switch {
		case late || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			t.Errorf("WaitForChange on the deleted record's token = %+v, %v, after its context ended; a deletion is a change, to be returned at once", got, err)
		case err == nil && (got == nil || got.ElectionNumber != entry.NoElections):
			t.Errorf("WaitForChange on the deleted record's token = %+v; want the missing record (entry.NoElections)", got)
		}
	}

	stale := sampleEntry(1, "w-stale")
	stale.Token = held
	if _, err := d.WriteEntry(t.Context(), stale); !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("write conditioned on the token of a deleted record: err = %v, want entry.ErrRaceLost", err)
	}
	if got := read(t, d); got.ElectionNumber != entry.NoElections {
		t.Fatalf("a write conditioned on the token of a deleted record created it again: read %+v", got)
	}

	// Created again with the deleted record's numbers, as by a writer
	// that never saw it.
	created := write(t, d, sampleEntry(0, "w-created"), entry.LeaderToken{})
	if created.SameVersion(held) {
		t.Errorf("the record created after the deletion has the deleted record's token %q", held.Version)
	}
	stale = sampleEntry(1, "w-stale-again")
	stale.Token = held
	if _, err := d.WriteEntry(t.Context(), stale); !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("write conditioned on the token of a deleted record, over a record created since: err = %v, want entry.ErrRaceLost", err)
	}
	if got := read(t, d); got.WriteID != "w-created" {
		t.Errorf("a write conditioned on the token of a deleted record replaced the record created since: write id %q, want w-created", got.WriteID)
	}
}
