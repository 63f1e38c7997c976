package leaderelection_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clocks "github.com/vimeo/go-clocks"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/racedecidertest"
)

var errInjected = errors.New("injected store failure")

// faultyDecider wraps a backend and injects failures. It forwards
// WaitForChange only when the wrapped decider implements it and push is on.
type faultyDecider struct {
	leaderelection.RaceDecider
	failAll        atomic.Bool  // every call fails
	hang           atomic.Bool  // every call blocks until its context ends
	applyThenFail  atomic.Int32 // the next n writes are applied but report an error
	failNextWrites atomic.Int32 // the next n writes fail without being applied
	reads, writes  atomic.Int64
	// opLimit, when set, makes every call past that many take a virtual
	// millisecond and fail, so that a busy loop lets virtual time move on
	// and shows up as a failed check instead of a hung test.
	opLimit atomic.Int64
	ops     atomic.Int64
	// afterWrite, when set, runs after each write is applied.
	afterWrite func()
}

func (f *faultyDecider) fault(ctx context.Context) error {
	if n := f.ops.Add(1); f.opLimit.Load() > 0 && n > f.opLimit.Load() {
		time.Sleep(time.Millisecond)
		return errInjected
	}
	if f.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if f.failAll.Load() {
		return errInjected
	}
	return nil
}

func (f *faultyDecider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	f.reads.Add(1)
	if err := f.fault(ctx); err != nil {
		return nil, err
	}
	return f.RaceDecider.ReadCurrent(ctx)
}

func (f *faultyDecider) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	f.writes.Add(1)
	if err := f.fault(ctx); err != nil {
		return entry.LeaderToken{}, err
	}
	if f.failNextWrites.Add(-1) >= 0 {
		return entry.LeaderToken{}, errors.New("timeout: write not applied")
	}
	tok, err := f.RaceDecider.WriteEntry(ctx, e)
	if err == nil && f.afterWrite != nil {
		f.afterWrite()
	}
	if err == nil && f.applyThenFail.Add(-1) >= 0 {
		return entry.LeaderToken{}, errors.New("connection reset after the request was sent")
	}
	return tok, err
}

// pushingFaultyDecider also forwards change notifications.
type pushingFaultyDecider struct{ *faultyDecider }

func (p pushingFaultyDecider) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	if err := p.fault(ctx); err != nil {
		return nil, err
	}
	return p.RaceDecider.(leaderelection.ChangeNotifier).WaitForChange(ctx, tok)
}

func newMonitor(t *testing.T) *racedecidertest.Monitor { return racedecidertest.NewMonitor(t) }

// next waits for the next election; in a synctest bubble an hour is virtual.
func next(m *racedecidertest.Monitor) *racedecidertest.Tenure { return m.Next(time.Hour) }

// runCandidate starts cfg.Acquire and returns a stop function that cancels it
// and waits for Acquire to return, checking its error.
func runCandidate(t *testing.T, cfg leaderelection.Config) (stop func()) {
	c := racedecidertest.StartCandidate(t.Context(), cfg)
	return func() { c.Stop(t) }
}

const (
	term = 10 * time.Second
	skew = time.Second
)

func baseConfig(d leaderelection.RaceDecider, id string, m *racedecidertest.Monitor, clock clocks.Clock) leaderelection.Config {
	return leaderelection.Config{
		Decider:      d,
		LeaderID:     id,
		HostPort:     []string{id + ":443"},
		TermLength:   term,
		MaxClockSkew: skew,
		Clock:        clock,
		OnElected:    m.OnElected(id),
	}
}
