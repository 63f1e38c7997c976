package leaderelection_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocks "github.com/vimeo/go-clocks"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

var errInjected = errors.New("injected store failure")

// faultyDecider wraps a backend and injects failures. It forwards
// WaitForChange only when the wrapped decider implements it and push is on.
type faultyDecider struct {
	leaderelection.RaceDecider
	failAll       atomic.Bool  // every call fails
	hang          atomic.Bool  // every call blocks until its context ends
	applyThenFail atomic.Int32 // the next n writes are applied but report an error
	reads, writes atomic.Int64
}

func (f *faultyDecider) fault(ctx context.Context) error {
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
	tok, err := f.RaceDecider.WriteEntry(ctx, e)
	if err == nil && f.applyThenFail.Add(-1) >= 0 {
		return entry.LeaderToken{}, errors.New("connection reset after the request was sent")
	}
	return tok, err
}

// pushingFaultyDecider also forwards change notifications.
type pushingFaultyDecider struct{ *faultyDecider }

func (p pushingFaultyDecider) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	return p.RaceDecider.(leaderelection.ChangeNotifier).WaitForChange(ctx, tok)
}

// tenure is one candidate's time as leader, as its callbacks saw it.
type tenure struct {
	id           string
	term         int64
	tv           *leaderelection.TimeView
	start, ended time.Time // on the real (virtual) clock
}

// recorder collects tenures from several candidates and checks mutual
// exclusion at every start.
type recorder struct {
	t       *testing.T
	mu      sync.Mutex
	tenures []*tenure
	elected chan *tenure
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, elected: make(chan *tenure, 100)}
}

// onElected returns an OnElected callback for candidate id that records its
// tenure and holds leadership until its context ends.
func (r *recorder) onElected(id string) func(ctx context.Context, tv *leaderelection.TimeView) {
	return func(ctx context.Context, tv *leaderelection.TimeView) {
		if !tv.ValueInFuture() {
			r.t.Errorf("%s: OnElected called with an expired TimeView (%v)", id, tv.Get())
		}
		tn := &tenure{id: id, term: tv.Term(), tv: tv, start: time.Now()}
		r.mu.Lock()
		for _, o := range r.tenures {
			if o.ended.IsZero() && o.tv.ValueInFuture() {
				r.t.Errorf("%s elected (term %d) while %s (term %d) holds a valid TimeView until %v",
					id, tn.term, o.id, o.term, o.tv.Get())
			}
			if o.term >= tn.term {
				r.t.Errorf("fencing token went backwards: %s term %d after %s term %d", id, tn.term, o.id, o.term)
			}
		}
		r.tenures = append(r.tenures, tn)
		r.mu.Unlock()
		r.elected <- tn
		<-ctx.Done()
		if tv.ValueInFuture() && !errors.Is(context.Cause(ctx), context.Canceled) {
			r.t.Errorf("%s: elected context ended (%v) but TimeView still valid", id, context.Cause(ctx))
		}
		r.mu.Lock()
		tn.ended = time.Now()
		r.mu.Unlock()
	}
}

// next waits for the next election.
func (r *recorder) next() *tenure {
	r.t.Helper()
	select {
	case tn := <-r.elected:
		return tn
	case <-time.After(time.Hour):
		r.t.Fatal("no election within an hour of virtual time")
		return nil
	}
}

// runCandidate starts cfg.Acquire and returns a stop function that cancels it
// and waits for Acquire to return, checking its error.
func runCandidate(t *testing.T, cfg leaderelection.Config) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cfg.Acquire(ctx) }()
	return func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Acquire returned %v, want context.Canceled", cfg.LeaderID, err)
		}
	}
}

const (
	term = 10 * time.Second
	skew = time.Second
)

func baseConfig(d leaderelection.RaceDecider, id string, r *recorder, clock clocks.Clock) leaderelection.Config {
	return leaderelection.Config{
		Decider:      d,
		LeaderID:     id,
		HostPort:     []string{id + ":443"},
		TermLength:   term,
		MaxClockSkew: skew,
		Clock:        clock,
		OnElected:    r.onElected(id),
	}
}
