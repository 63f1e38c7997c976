package racedecidertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode"

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

// mutant is a defect the conformance suites must catch: fails names the
// check that must fail for it ("" for the sound Decider, which must pass
// every suite), as SUITE/CHECK or SUITE for a suite without checks of its
// own, and says, when set, what its failure must say.
type mutant struct {
	fails, says string
	make        func(b *broken)
}

// The suites each mutant runs in, by the first part of its fails.
const (
	suiteRun      = "Run"
	suiteDeleted  = "CheckDeleted"
	suiteElection = "RunElection"
)

var mutants = map[string]mutant{
	"sound": {make: func(*broken) {}},
	// Writes whatever the record holds: the condition is not sent.
	"unconditional writes": {fails: "Run/StaleTokenLoses", make: func(b *broken) {
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
	"lost race not classified": {fails: "Run/CreateLosesWhenRecordExists", make: func(b *broken) {
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			tok, err := b.Decider.WriteEntry(ctx, e)
			if errors.Is(err, entry.ErrRaceLost) {
				err = errors.New("412 Precondition Failed")
			}
			return tok, err
		}
	}},
	// A field the encoding forgets.
	"lineage dropped": {fails: "Run/EveryFieldRoundTrips", make: func(b *broken) {
		b.onRead(func(e *entry.RaceEntry) { e.Lineage = "" })
	}},
	// Numbers kept in 32 bits, as in an INTEGER column.
	"numbers narrowed to 32 bits": {fails: "Run/EveryFieldRoundTrips/engine_numbers", make: func(b *broken) {
		b.onRead(func(e *entry.RaceEntry) {
			e.ElectionNumber, e.Term = int64(int32(e.ElectionNumber)), int64(int32(e.Term))
		})
	}},
	// Numbers kept as doubles, as by a JSON reader that parses them so:
	// exact up to 2^53 (the engine's own), rounded above.
	"numbers kept as doubles": {fails: "Run/EveryFieldRoundTrips/encoding_limits", make: func(b *broken) {
		b.onRead(func(e *entry.RaceEntry) {
			e.ElectionNumber, e.Term = int64(float64(e.ElectionNumber)), int64(float64(e.Term))
		})
	}},
	// Text kept in a column or header that is not UTF-8.
	"text outside ASCII mangled": {fails: "Run/EveryFieldRoundTrips/encoding_limits", make: func(b *broken) {
		ascii := func(s string) string {
			return strings.Map(func(r rune) rune {
				if r > unicode.MaxASCII {
					return '?'
				}
				return r
			}, s)
		}
		b.onRead(func(e *entry.RaceEntry) {
			e.LeaderID = ascii(e.LeaderID)
			for i, hp := range e.HostPort {
				e.HostPort[i] = ascii(hp)
			}
		})
	}},
	// A missing object reported as the store's not-found error.
	"missing record as error": {fails: "Run/MissingRecordReadsAsNoElections", make: func(b *broken) {
		b.read = func(ctx context.Context) (*entry.RaceEntry, error) {
			e, err := b.Decider.ReadCurrent(ctx)
			if err == nil && e.ElectionNumber == entry.NoElections {
				return nil, errors.New("404 Not Found")
			}
			return e, err
		}
	}},
	// Calls that go on after their context ended.
	"context ignored": {fails: "Run/CancelledContext", make: func(b *broken) {
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			return b.Decider.WriteEntry(context.WithoutCancel(ctx), e)
		}
	}},
	// A push channel that hands back the current record instead of
	// waiting for a change.
	"push does not wait": {fails: "Run/ChangeNotifier", make: func(b *broken) {
		b.wait = func(ctx context.Context, _ entry.LeaderToken) (*entry.RaceEntry, error) {
			return b.Decider.ReadCurrent(ctx)
		}
	}},
	// A push channel that never delivers: a change already made is
	// found at once, but a waiter learns of one only when its context
	// ends and it looks again.
	"push never wakes": {fails: "Run/ChangeNotifier", says: "returned only once its context had ended", make: func(b *broken) {
		b.wait = func(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
			changed := func() (*entry.RaceEntry, bool) {
				e, err := b.Decider.ReadCurrent(context.WithoutCancel(ctx))
				return e, err == nil && !e.Token.SameVersion(tok)
			}
			if e, ok := changed(); ok {
				return e, nil
			}
			<-ctx.Done()
			if e, ok := changed(); ok {
				return e, nil
			}
			return nil, fmt.Errorf("wait: %w", ctx.Err())
		}
	}},
	// A push channel that sets its server's watch timeout from the
	// deadline in whole seconds (as Kubernetes' timeoutSeconds) and
	// reports that timeout as its caller's deadline: it vouches that
	// nothing changed for a time it did not watch, at once for a
	// deadline under a second away.
	"vouches before its deadline": {fails: "Run/ChangeNotifier", says: "before its deadline", make: func(b *broken) {
		b.wait = func(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
			server := ctx
			if deadline, ok := ctx.Deadline(); ok {
				var cancel context.CancelFunc
				server, cancel = context.WithTimeout(ctx, time.Until(deadline).Truncate(time.Second))
				defer cancel()
			}
			e, err := b.Decider.WaitForChange(server, tok)
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("watch timed out: %w", context.DeadlineExceeded)
			}
			return e, err
		}
	}},
	// Commit times in the wrong unit: microseconds read as milliseconds.
	"commit time in the wrong unit": {fails: "Run/CommitTimes", says: "from this machine's clock", make: func(b *broken) {
		b.onToken(func(tok *entry.LeaderToken) { tok.CommitTime = time.UnixMilli(tok.CommitTime.UnixMicro()) })
	}},
	// Commit times reported by a create but not by a replace.
	"commit time only on create": {fails: "Run/CommitTimes", says: "reports it on every write or on none", make: func(b *broken) {
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			tok, err := b.Decider.WriteEntry(ctx, e)
			if !e.Token.IsZero() {
				tok.CommitTime = time.Time{}
			}
			return tok, err
		}
	}},
	// Commit times that go back from one write to the next, as from
	// replicas whose clocks are seconds apart.
	"commit time goes back": {fails: "Run/CommitTimes", says: "must not go back", make: func(b *broken) {
		b.onToken(func(tok *entry.LeaderToken) {
			v, _ := strconv.Atoi(tok.Version)
			tok.CommitTime = tok.CommitTime.Add(-time.Duration(v) * 10 * time.Second)
		})
	}},
	// A write conditioned on a record that is gone is taken for a
	// create (S3's 404 to If-Match answered by a retry without it).
	"write on a deleted record creates it": {fails: suiteDeleted, says: "conditioned on the token of a deleted record", make: func(b *broken) {
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			cur, err := b.Decider.ReadCurrent(ctx)
			if err != nil {
				return entry.LeaderToken{}, err
			}
			if cur.ElectionNumber == entry.NoElections {
				e = e.Clone()
				e.Token = entry.LeaderToken{}
			}
			return b.Decider.WriteEntry(ctx, e)
		}
	}},
	// Versions that count writes since the record was created, and so
	// restart when it is created again (a DynamoDB item's counter with
	// no write id in the condition). Only its reads and writes are
	// broken so: CheckDeleted uses no other.
	"versions restart with the record": {fails: suiteDeleted, says: "deleted record's token", make: func(b *broken) {
		var (
			mu      sync.Mutex
			created int64 // memory's version of the current record's creation
		)
		since := func(tok entry.LeaderToken) entry.LeaderToken {
			if !tok.IsZero() {
				v, _ := strconv.ParseInt(tok.Version, 10, 64)
				tok.Version = strconv.FormatInt(v-created+1, 10)
			}
			return tok
		}
		b.read = func(ctx context.Context) (*entry.RaceEntry, error) {
			mu.Lock()
			defer mu.Unlock()
			e, err := b.Decider.ReadCurrent(ctx)
			if err == nil {
				e.Token = since(e.Token)
			}
			return e, err
		}
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			mu.Lock()
			defer mu.Unlock()
			cur, err := b.Decider.ReadCurrent(ctx)
			if err != nil {
				return entry.LeaderToken{}, err
			}
			e = e.Clone()
			if !e.Token.IsZero() {
				if cur.Token.IsZero() || since(cur.Token).Version != e.Token.Version {
					return entry.LeaderToken{}, fmt.Errorf("version %s is not current: %w", e.Token.Version, entry.ErrRaceLost)
				}
				e.Token = cur.Token
			}
			tok, err := b.Decider.WriteEntry(ctx, e)
			if err == nil && e.Token.IsZero() {
				created, _ = strconv.ParseInt(tok.Version, 10, 64)
			}
			return since(tok), err
		}
	}},
	// Reads that show each extension with the expiry of the record it
	// replaced (a cache of the record's metadata a write behind), so that
	// a candidate takes over as the leader's previous term would end.
	// Only an extension whose answer was lost at a cut hides that: the
	// leader's TimeView is then as early as what reads show, and only
	// the stored record tells the successor came too soon.
	"reads show an extension's expiry a write late": {fails: suiteElection, says: "before the cut-off leader's term ended", make: func(b *broken) {
		var (
			mu    sync.Mutex
			shown = map[string]time.Time{} // by memory's version
		)
		show := func(e *entry.RaceEntry) {
			mu.Lock()
			defer mu.Unlock()
			if x, ok := shown[e.Token.Version]; ok {
				e.TermExpiry = x
			}
		}
		b.onRead(show)
		b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
			mu.Lock()
			defer mu.Unlock()
			cur, err := b.Decider.ReadCurrent(ctx)
			if err != nil {
				return entry.LeaderToken{}, err
			}
			tok, err := b.Decider.WriteEntry(ctx, e)
			if err == nil && cur.Term == e.Term && !e.Released {
				shown[tok.Version] = cur.TermExpiry
			}
			return tok, err
		}
	}},
}

// onRead has b's reads and waits pass each record they return through f.
func (b *broken) onRead(f func(e *entry.RaceEntry)) {
	b.read = func(ctx context.Context) (*entry.RaceEntry, error) {
		e, err := b.Decider.ReadCurrent(ctx)
		if err == nil {
			f(e)
		}
		return e, err
	}
	b.wait = func(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
		e, err := b.Decider.WaitForChange(ctx, tok)
		if err == nil {
			f(e)
		}
		return e, err
	}
}

// onToken has b pass every token it returns, from a write, a read or a
// wait, through f.
func (b *broken) onToken(f func(tok *entry.LeaderToken)) {
	b.onRead(func(e *entry.RaceEntry) {
		if !e.Token.IsZero() {
			f(&e.Token)
		}
	})
	b.write = func(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
		tok, err := b.Decider.WriteEntry(ctx, e)
		if err == nil {
			f(&tok)
		}
		return tok, err
	}
}

// answerLost is an Access to a store on which a cut loses the answer to a
// write the store applies: from Cut(true) on, the next write is applied,
// then the cut begins and the write fails as an unknown outcome. That is
// the cut after which a leader's TimeView ends before its stored term.
type answerLost struct {
	racedecidertest.Access
	armed atomic.Bool
}

func loseAnswerAtCut(a racedecidertest.Access) racedecidertest.Access {
	l := &answerLost{Access: a}
	return racedecidertest.Access{Decider: l, Cut: l.setCut}
}

func (l *answerLost) setCut(cut bool) {
	l.armed.Store(cut)
	if !cut {
		l.Access.Cut(false)
	}
}

func (l *answerLost) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	return l.Decider.ReadCurrent(ctx)
}

func (l *answerLost) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	if !l.armed.CompareAndSwap(true, false) {
		return l.Decider.WriteEntry(ctx, e)
	}
	_, err := l.Decider.WriteEntry(ctx, e)
	l.Access.Cut(true)
	if err != nil {
		return entry.LeaderToken{}, err
	}
	return entry.LeaderToken{}, fmt.Errorf("the answer was lost at the cut: %w", context.DeadlineExceeded)
}

func (l *answerLost) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	return l.Decider.(leaderelection.ChangeNotifier).WaitForChange(ctx, tok)
}

const mutantEnv = "RACEDECIDERTEST_MUTANT"

// The conformance suites (Run, CheckDeleted, RunElection) fail a backend
// with any of the mutants' defects, in the check meant to catch it, and
// pass the sound memory Decider. Each mutant runs in a child process (this
// test binary, this test), as a failing suite fails the test that runs it.
func TestRunCatchesBrokenDeciders(t *testing.T) {
	if name := os.Getenv(mutantEnv); name != "" {
		m, ok := mutants[name]
		if !ok {
			t.Fatalf("%s=%q names no mutant", mutantEnv, name)
		}
		runSuites(t, m)
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
				t.Errorf("the suites failed the sound Decider (%v):\n%s", err, out)
			case m.fails == "":
				for _, check := range []string{"Run/ChangeNotifier", "Run/CommitTimes", suiteDeleted, suiteElection} {
					if !strings.Contains(string(out), "--- PASS: TestRunCatchesBrokenDeciders/"+check+" ") {
						t.Errorf("the suites passed the sound Decider without %s:\n%s", check, out)
					}
				}
			case !errors.As(err, &exit):
				t.Errorf("the suites passed (or could not run: %v) a Decider with the defect:\n%s", err, out)
			case !strings.Contains(string(out), "--- FAIL: TestRunCatchesBrokenDeciders/"+m.fails+" "):
				t.Errorf("the suites failed the Decider, but not in %s:\n%s", m.fails, out)
			case !strings.Contains(string(out), m.says):
				t.Errorf("%s failed, but without saying %q:\n%s", m.fails, m.says, out)
			}
		})
	}
}

// runSuites runs, on memory Deciders with m's defect, the suite m.fails
// names, or every suite for the sound Decider.
func runSuites(t *testing.T, m mutant) {
	newBroken := func() *broken {
		b := &broken{Decider: memory.NewDecider()}
		m.make(b)
		return b
	}
	suite, _, _ := strings.Cut(m.fails, "/")
	if suite == "" || suite == suiteRun {
		t.Run(suiteRun, func(t *testing.T) {
			racedecidertest.Run(t, func(*testing.T) leaderelection.RaceDecider { return newBroken() })
		})
	}
	if suite == "" || suite == suiteDeleted {
		t.Run(suiteDeleted, func(t *testing.T) {
			b := newBroken()
			racedecidertest.CheckDeleted(t, b, func(*testing.T) { b.Decider.Delete() })
		})
	}
	if suite == "" || suite == suiteElection {
		// Every cut loses the answer to an extension the store
		// applied, the case where the stored term outlasts the cut-off
		// leader's TimeView.
		t.Run(suiteElection, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroken()
				racedecidertest.RunElection(t, func(*testing.T, int) racedecidertest.Access {
					return loseAnswerAtCut(racedecidertest.Cuttable(b))
				}, racedecidertest.Timing{TermLength: 10 * time.Second, MaxClockSkew: time.Second})
			})
		})
	}
}
