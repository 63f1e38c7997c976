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

// spaced is a store that declares a MinWriteInterval, as GCS does, and
// pushes changes.
type spaced struct{ *memory.Decider }

func (spaced) MinWriteInterval() time.Duration { return 1500 * time.Millisecond }

// spacedPoll is one that does not push.
type spacedPoll struct{ leaderelection.RaceDecider }

func (spacedPoll) MinWriteInterval() time.Duration { return 1500 * time.Millisecond }

// A Cuttable keeps what the engine looks for in the store it wraps (its
// push channel and its write spacing) and its name.
func TestCuttableKeepsCapabilities(t *testing.T) {
	for _, c := range []struct {
		d    leaderelection.RaceDecider
		push bool
		name string
	}{
		{spaced{memory.NewDecider()}, true, "memory"},
		{spacedPoll{memory.NewDecider()}, false, "racedecidertest_test.spacedPoll"},
	} {
		d := racedecidertest.Cuttable(c.d).Decider
		if _, push := d.(leaderelection.ChangeNotifier); push != c.push {
			t.Errorf("Cuttable(%T): ChangeNotifier %v, want %v", c.d, push, c.push)
		}
		if ws, ok := d.(leaderelection.WriteSpacer); !ok || ws.MinWriteInterval() != 1500*time.Millisecond {
			t.Errorf("Cuttable(%T) lost the store's MinWriteInterval", c.d)
		}
		if got := fmt.Sprint(d); got != c.name {
			t.Errorf("Cuttable(%T) is named %q; want %q", c.d, got, c.name)
		}
	}
}
