package racedecidertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// A cut ends a WaitForChange already in progress, even a cut over before it
// returns, as it fails the calls made during it, and a restored Access waits
// again.
func TestCuttableCutsAWaitInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		acc := racedecidertest.Cuttable(mem)
		n := acc.Decider.(leaderelection.ChangeNotifier)
		cur, err := acc.Decider.ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		wait := func() chan error {
			done := make(chan error, 1)
			go func() {
				_, err := n.WaitForChange(t.Context(), cur.Token)
				done <- err
			}()
			synctest.Wait()
			return done
		}
		done := wait()
		acc.Cut(true)
		synctest.Wait()
		cutOff(t, done, "the wait in progress at the cut")
		if _, err := acc.Decider.ReadCurrent(t.Context()); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a read during the cut returned %v; want context.DeadlineExceeded", err)
		}

		// A cut that is over before the wait returns fails it too.
		acc.Cut(false)
		done = wait()
		acc.Cut(true)
		acc.Cut(false)
		synctest.Wait()
		cutOff(t, done, "the wait in progress at a brief cut")

		done = wait()
		select {
		case err := <-done:
			t.Fatalf("restored, a wait with no change returned %v", err)
		default:
		}
		en := cur.ElectionNumber + 1
		if _, err := mem.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: en, Term: en, LeaderID: "x",
			TermExpiry: time.Now().Add(time.Minute), WriteID: "w", Token: cur.Token}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := <-done; err != nil {
			t.Errorf("restored, a wait that saw a change returned %v", err)
		}
	})
}

// stalling is a store whose writes never answer: they return only when their
// context ends, with its error.
type stalling struct{ leaderelection.RaceDecider }

func (stalling) WriteEntry(ctx context.Context, _ *entry.RaceEntry) (entry.LeaderToken, error) {
	<-ctx.Done()
	return entry.LeaderToken{}, ctx.Err()
}

// A cut ends a write in progress: the write's own context ends (a store
// call blocked on the network is abandoned) and it fails as a lost answer.
func TestCuttableCutsAWriteInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acc := racedecidertest.Cuttable(stalling{memory.NewDecider()})
		done := make(chan error, 1)
		go func() {
			_, err := acc.Decider.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, Term: 1, LeaderID: "x",
				TermExpiry: time.Now().Add(time.Minute), WriteID: "w"})
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a write to a store that does not answer returned %v before any cut", err)
		default:
		}
		acc.Cut(true)
		synctest.Wait()
		cutOff(t, done, "the write in progress at the cut")
	})
}

// A Cuttable is named as the store it wraps, or by that store's type when it
// has no name, so that errors and HealthCheck name the same election with or
// without it.
func TestCuttableName(t *testing.T) {
	for _, c := range []struct {
		d    leaderelection.RaceDecider
		want string
	}{
		{memory.NewDecider(), "memory"},
		{stalling{memory.NewDecider()}, "racedecidertest_test.stalling"},
	} {
		if got := fmt.Sprint(racedecidertest.Cuttable(c.d).Decider); got != c.want {
			t.Errorf("Cuttable(%T) is named %q; want %q", c.d, got, c.want)
		}
	}
}

// cutOff checks that the call what, whose error done carries, has returned
// for a cut, failing as an unreachable store's does.
func cutOff(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s returned %v; want context.DeadlineExceeded", what, err)
		}
	default:
		t.Fatalf("%s still waits", what)
	}
}
