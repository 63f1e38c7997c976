package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

func TestConformance(t *testing.T) {
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider { return memory.NewDecider() })
}

func TestCorrupt(t *testing.T) {
	d := memory.NewDecider()
	racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) { d.SetRaw(data) }, "memory: record")
}

// TestChangeThenCancel: a wait whose record changes and whose context ends
// just after returns the change, never ctx's error, which would vouch that
// none came. The two race inside WaitForChange: many rounds, so that some
// land between its look at the record and its wait.
func TestChangeThenCancel(t *testing.T) {
	d := memory.NewDecider()
	var tok entry.LeaderToken
	var vouched int
	for i := range 20000 {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := d.WaitForChange(ctx, tok)
			done <- err
		}()
		next, err := d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: int64(i), Term: int64(i), LeaderID: "a",
			WriteID: fmt.Sprint("w-", i), TermExpiry: time.Now(), Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; errors.Is(err, context.Canceled) {
			vouched++
		}
		tok = next
	}
	if vouched > 0 {
		t.Errorf("%d of 20000 waits returned context.Canceled for a record that had changed before the context ended", vouched)
	}
}

// A record that cannot be encoded is refused for good, naming the store: the
// engine must end its campaign, not retry it.
func TestUnencodableRecordIsRefused(t *testing.T) {
	d := memory.NewDecider()
	_, err := d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, Term: 1, LeaderID: "a\xff", WriteID: "w", TermExpiry: time.Now()})
	if !errors.Is(err, entry.ErrRefused) || !strings.HasPrefix(fmt.Sprint(err), "memory: write: ") {
		t.Fatalf("WriteEntry = %v, want a memory error wrapping ErrRefused", err)
	}
	if e, err := d.ReadCurrent(t.Context()); err != nil || e.ElectionNumber != entry.NoElections {
		t.Fatalf("after the refusal the store holds %+v, %v; want no record", e, err)
	}
}

func TestDeleted(t *testing.T) {
	d := memory.NewDecider()
	racedecidertest.CheckDeleted(t, d, func(*testing.T) { d.Delete() })
}
