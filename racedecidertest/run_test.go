package racedecidertest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// A broken backend: the memory Decider with one of the defects a real
// backend could have (each method left nil keeps memory's own).
type broken struct {
	*memory.Decider
	read  func(ctx context.Context) (*entry.RaceEntry, error)
	write func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error)
	wait  func(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error)
}

func (b *broken) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if b.read != nil {
		return b.read(ctx)
	}
	return b.Decider.ReadCurrent(ctx)
}

func (b *broken) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	if b.write != nil {
		return b.write(ctx, e)
	}
	return b.Decider.WriteEntry(ctx, e)
}

func (b *broken) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	if b.wait != nil {
		return b.wait(ctx, tok)
	}
	return b.Decider.WaitForChange(ctx, tok)
}

// mutants are the defects the conformance suite must catch, each with the
// check that must fail for it ("" for the sound Decider, which must pass).
var mutants = map[string]struct {
	fails string
	make  func(b *broken)
}{
	"sound": {"", func(*broken) {}},
	// Writes whatever the record holds: the condition is not sent.
	"unconditional writes": {"StaleTokenLoses", func(b *broken) {
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			cur, err := b.Decider.ReadCurrent(ctx)
			if err != nil {
				return entry.LeaderToken{}, err
			}
			e = e.Clone()
			e.Token = cur.Token
			return b.Decider.WriteEntry(ctx, e)
		}
	}},
	// A failed precondition passed on as the store's own error.
	"lost race not classified": {"CreateLosesWhenRecordExists", func(b *broken) {
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			tok, err := b.Decider.WriteEntry(ctx, e)
			if errors.Is(err, entry.ErrRaceLost) {
				err = errors.New("412 Precondition Failed")
			}
			return tok, err
		}
	}},
	// A field the encoding forgets.
	"lineage dropped": {"EveryFieldRoundTrips", func(b *broken) {
		b.read = func(ctx context.Context) (*entry.RaceEntry, error) {
			e, err := b.Decider.ReadCurrent(ctx)
			if e != nil {
				e.Lineage = ""
			}
			return e, err
		}
	}},
	// A missing object reported as the store's not-found error.
	"missing record as error": {"MissingRecordReadsAsNoElections", func(b *broken) {
		b.read = func(ctx context.Context) (*entry.RaceEntry, error) {
			e, err := b.Decider.ReadCurrent(ctx)
			if err == nil && e.ElectionNumber == entry.NoElections {
				return nil, errors.New("404 Not Found")
			}
			return e, err
		}
	}},
	// Calls that go on after their context ended.
	"context ignored": {"CancelledContext", func(b *broken) {
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			return b.Decider.WriteEntry(context.WithoutCancel(ctx), e)
		}
	}},
	// A push channel that hands back the current record instead of
	// waiting for a change.
	"push does not wait": {"ChangeNotifier", func(b *broken) {
		b.wait = func(ctx context.Context, _ entry.LeaderToken) (*entry.RaceEntry, error) {
			return b.Decider.ReadCurrent(ctx)
		}
	}},
}

const mutantEnv = "RACEDECIDERTEST_MUTANT"

// The conformance suite fails a backend with any of the mutants' defects, in
// the check meant to catch it, and passes the sound memory Decider. Each
// mutant runs in a child process (this test binary, this test), as a
// failing suite fails the test that runs it.
func TestRunCatchesBrokenDeciders(t *testing.T) {
	if name := os.Getenv(mutantEnv); name != "" {
		m, ok := mutants[name]
		if !ok {
			t.Fatalf("%s=%q names no mutant", mutantEnv, name)
		}
		racedecidertest.Run(t, func(*testing.T) leaderelection.RaceDecider {
			b := &broken{Decider: memory.NewDecider()}
			m.make(b)
			return b
		})
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range mutants {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), self, "-test.run=^TestRunCatchesBrokenDeciders$", "-test.v", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case m.fails == "" && err != nil:
				t.Errorf("the suite failed the sound Decider (%v):\n%s", err, out)
			case m.fails == "" && !strings.Contains(string(out), "--- PASS: TestRunCatchesBrokenDeciders/ChangeNotifier "):
				t.Errorf("the suite passed the sound Decider without its push check:\n%s", out)
			case m.fails == "":
			case !errors.As(err, &exit):
				t.Errorf("the suite passed (or could not run: %v) a Decider with the defect:\n%s", err, out)
			case !strings.Contains(string(out), "--- FAIL: TestRunCatchesBrokenDeciders/"+m.fails+" "):
				t.Errorf("the suite failed the Decider, but not in %s:\n%s", m.fails, out)
			}
		})
	}
}
