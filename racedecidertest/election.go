package racedecidertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

// Tenure is one candidate's time as leader, as its OnElected saw it.
type Tenure struct {
	ID   string
	Term int64
	TV   *leaderelection.TimeView
	// Start is when OnElected was called; Ended when its context ended
	// (zero while it leads). Both on the real clock (virtual in a synctest
	// bubble).
	Start, Ended time.Time
}

// Monitor records the tenures of several candidates and checks, at every
// election, that no other candidate still holds a valid TimeView and that the
// fencing token (Term) went up. Because a TimeView only moves forward on a
// write the store accepted, and that write cannot succeed once another
// candidate has written, checking at each election covers every instant.
type Monitor struct {
	t       testing.TB
	mu      sync.Mutex
	tenures []*Tenure
	elected chan *Tenure
}

// NewMonitor returns a Monitor reporting failures to t.
func NewMonitor(t testing.TB) *Monitor {
	return &Monitor{t: t, elected: make(chan *Tenure, 1000)}
}

// OnElected returns an OnElected callback for candidate id that records its
// tenure and leads until its context ends.
func (m *Monitor) OnElected(id string) func(ctx context.Context, tv *leaderelection.TimeView) {
	return func(ctx context.Context, tv *leaderelection.TimeView) {
		if !tv.ValueInFuture() {
			m.t.Errorf("%s: OnElected called with an expired TimeView (%v)", id, tv.Get())
		}
		tn := &Tenure{ID: id, Term: tv.Term(), TV: tv, Start: time.Now()}
		m.mu.Lock()
		for _, o := range m.tenures {
			// Whether or not its context has ended: the engine ends a
			// context before the TimeView (it waits for OnElected in
			// between), and only the TimeView says who may act.
			if o.TV.ValueInFuture() {
				m.t.Errorf("%s elected (term %d) while %s (term %d) holds a valid TimeView until %v",
					id, tn.Term, o.ID, o.Term, o.TV.Get())
			}
			if o.Term >= tn.Term {
				m.t.Errorf("fencing token did not go up: %s has term %d after %s had term %d", id, tn.Term, o.ID, o.Term)
			}
		}
		m.tenures = append(m.tenures, tn)
		m.mu.Unlock()
		m.elected <- tn
		<-ctx.Done()
		m.mu.Lock()
		tn.Ended = time.Now()
		m.mu.Unlock()
	}
}

// Next waits up to timeout for the next election.
func (m *Monitor) Next(timeout time.Duration) *Tenure {
	m.t.Helper()
	select {
	case tn := <-m.elected:
		return tn
	case <-time.After(timeout):
		m.t.Fatalf("no election within %v", timeout)
		return nil
	}
}

// Ended returns when tn's elected context ended, or zero if it has not.
func (m *Monitor) Ended(tn *Tenure) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return tn.Ended
}

// Access is one candidate's way to the store under test.
type Access struct {
	Decider leaderelection.RaceDecider
	// Cut cuts (true) or restores (false) this candidate's access to the
	// store: its requests fail or hang. Required by RunElection.
	Cut func(cut bool)
}

// Timing is the election timing RunElection uses. Over a real server, keep
// TermLength at a second or more and MaxClockSkew at most a quarter of it.
type Timing struct {
	TermLength, MaxClockSkew time.Duration
}

// Candidate runs one Acquire; Stop cancels it and checks it returns
// context.Canceled.
type Candidate struct {
	ID     string
	cancel context.CancelFunc
	done   chan error
}

// StartCandidate starts cfg.Acquire in a goroutine.
func StartCandidate(ctx context.Context, cfg leaderelection.Config) *Candidate {
	ctx, cancel := context.WithCancel(ctx)
	c := &Candidate{ID: cfg.LeaderID, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- cfg.Acquire(ctx) }()
	return c
}

// Stop cancels the candidate's Acquire and waits for it to return.
func (c *Candidate) Stop(t testing.TB) {
	t.Helper()
	c.cancel()
	if err := <-c.done; !errors.Is(err, context.Canceled) {
		t.Errorf("%s: Acquire returned %v, want context.Canceled", c.ID, err)
	}
}

// RunElection runs three candidates through Config.Acquire in real time, each
// with its own Access (candidates 0 to 2), and a watcher with Access 3. It
// checks: a first election, an extension (seen by the watcher), a graceful
// handover that does not wait out the term, and a takeover after the
// leader's access is cut that waits for TermExpiry + MaxClockSkew, where
// TermExpiry is that of the cut-off leader's last record in the store: later
// than its TimeView's when the cut lost the answer to an extension the store
// applied. The Monitor checks mutual exclusion and fencing throughout.
func RunElection(t *testing.T, newAccess func(t *testing.T, candidate int) Access, timing Timing) {
	term, skew := timing.TermLength, timing.MaxClockSkew
	patience := 4*term + 4*skew
	m := NewMonitor(t)
	ctx := t.Context()
	// Every access goes through a storeLog, which learns from the
	// candidates' and the watcher's own calls which records the store held.
	seen := newStoreLog()
	logged := func(a Access) Access { return Access{Decider: seen.wrap(a.Decider), Cut: a.Cut} }

	changes := make(chan leaderelection.Change, 1000)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- leaderelection.WatchConfig{Decider: logged(newAccess(t, 3)).Decider, MaxClockSkew: skew, PollInterval: term / 8}.
			Watch(watchCtx, func(_ context.Context, c leaderelection.Change) { changes <- c })
	}()
	defer func() {
		stopWatch()
		<-watchDone
	}()
	awaitChange := func(kind leaderelection.ChangeKind, term int64) leaderelection.Change {
		t.Helper()
		deadline := time.After(patience)
		for {
			select {
			case c := <-changes:
				if c.Kind == kind && c.Entry.Term == term {
					return c
				}
			case <-deadline:
				t.Fatalf("watcher did not report %v for term %d within %v", kind, term, patience)
			}
		}
	}

	accesses := make([]Access, 3)
	candidates := make([]*Candidate, 3)
	for i := range candidates {
		accesses[i] = logged(newAccess(t, i))
		id := fmt.Sprintf("candidate-%d", i)
		candidates[i] = StartCandidate(ctx, leaderelection.Config{
			Decider:      accesses[i].Decider,
			LeaderID:     id,
			HostPort:     []string{fmt.Sprintf("127.0.0.1:%d", 9000+i)},
			TermLength:   term,
			MaxClockSkew: skew,
			OnElected:    m.OnElected(id),
		})
	}
	defer func() {
		for _, c := range candidates {
			if c != nil {
				c.Stop(t)
			}
		}
	}()
	index := func(tn *Tenure) int {
		var i int
		fmt.Sscanf(tn.ID, "candidate-%d", &i)
		return i
	}

	// First election, seen by the watcher too.
	first := m.Next(patience)
	awaitChange(leaderelection.LeaderElected, first.Term)
	t.Logf("%s elected with term %d", first.ID, first.Term)

	// An extension.
	ext := awaitChange(leaderelection.TermExtended, first.Term)
	if ext.Entry.LeaderID != first.ID {
		t.Fatalf("extension by %s, want %s", ext.Entry.LeaderID, first.ID)
	}

	// Graceful handover: stop the leader; the next must not wait out its
	// term. The term held runs to the latest expiry the store is known to
	// hold for it (the extension the watcher saw among them) even when the
	// leader's TimeView does not show it yet: a store may push a write to
	// the watcher before its writer has the answer.
	heldUntil := seen.heldUntil(first)
	released := time.Now()
	candidates[index(first)].Stop(t)
	candidates[index(first)] = nil
	if first.TV.ValueInFuture() {
		t.Errorf("%s's TimeView is still valid after its Acquire returned", first.ID)
	}
	second := m.Next(patience)
	t.Logf("graceful handover to %s (term %d) took %v", second.ID, second.Term, second.Start.Sub(released))
	if !second.Start.Before(heldUntil) {
		t.Errorf("handover at %v waited out the released term (until %v)", second.Start, heldUntil)
	}
	// A polling watcher may miss a release taken over within one poll; it
	// must learn of the new leader.
	awaitChange(leaderelection.LeaderElected, second.Term)

	// Cut the leader off: it must stop by its expiry, and the successor
	// must wait for the expiry of the last record of its term the store
	// held, plus MaxClockSkew. That record may be later than the leader's
	// TimeView: a cut can lose the answer to an extension the store
	// applied. The successor read that record before writing over it
	// (its write is conditioned on its token), so the storeLog knows it.
	accesses[index(second)].Cut(true)
	third := m.Next(patience)
	expiry := second.TV.Get()
	stored := seen.heldUntil(second)
	if !third.Start.After(stored.Add(skew)) {
		t.Errorf("%s elected at %v, before the cut-off leader's term ended + MaxClockSkew: its term ran to %v as stored (its TimeView: %v)",
			third.ID, third.Start, stored, expiry)
	}
	ended := m.Ended(second)
	if ended.IsZero() || ended.Sub(expiry) > skew {
		t.Errorf("cut-off leader's elected context ended at %v, want by its expiry %v (allowing scheduling delay)", ended, expiry)
	}
	t.Logf("takeover by %s (term %d) %v after the cut-off leader's term as stored (%v after its TimeView's expiry)",
		third.ID, third.Term, third.Start.Sub(stored), third.Start.Sub(expiry))
	accesses[index(second)].Cut(false)
}

// storeLog records, for RunElection, every record its candidates and its
// watcher sent to the store or were shown by it, so that a tenure's end is
// judged by what the store held rather than by what its leader knew.
type storeLog struct {
	mu sync.Mutex
	// sent holds every record written, applied or not, by write id.
	sent map[string]*entry.RaceEntry
	// stored holds every record known to have been stored, by write id:
	// a write's success, a read or a wait showed it.
	stored map[string]*entry.RaceEntry
}

func newStoreLog() *storeLog {
	return &storeLog{sent: map[string]*entry.RaceEntry{}, stored: map[string]*entry.RaceEntry{}}
}

func (l *storeLog) send(e *entry.RaceEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[e.WriteID] = e.Clone()
}

func (l *storeLog) saw(e *entry.RaceEntry) {
	if e == nil || e.ElectionNumber == entry.NoElections {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stored[e.WriteID] = e.Clone()
}

// heldUntil returns when tn's term ends: the later of its TimeView and the
// expiry of every record of its tenure (its term, its id, not a release)
// known to have been stored. The expiry is taken from the record as it was
// sent, too: a write whose answer was lost is known to have been applied
// only by a read that found its write id, and what the writer asked for is
// what the store holds.
func (l *storeLog) heldUntil(tn *Tenure) time.Time {
	until := tn.TV.Get()
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, rec := range l.stored {
		if rec.Term != tn.Term || rec.LeaderID != tn.ID || rec.Released {
			continue
		}
		if rec.TermExpiry.After(until) {
			until = rec.TermExpiry
		}
		if s, ok := l.sent[id]; ok && s.TermExpiry.After(until) {
			until = s.TermExpiry
		}
	}
	return until
}

// wrap returns d with its calls logged, keeping the optional capabilities
// the engine looks for (ChangeNotifier, WriteSpacer), so that the election
// runs as it would on d itself.
func (l *storeLog) wrap(d leaderelection.RaceDecider) leaderelection.RaceDecider {
	lg := &loggedDecider{d: d, log: l}
	if n, push := d.(leaderelection.ChangeNotifier); push {
		return keepSpacer(&loggedPush{lg, n}, d)
	}
	return keepSpacer(lg, d)
}

// wrapper is a Decider wrapping another, named after it.
type wrapper interface {
	leaderelection.RaceDecider
	fmt.Stringer
}

// keepSpacer returns w, which wraps d, with d's WriteSpacer if it has one,
// so that the engine spaces its writes on w as it would on d.
func keepSpacer(w wrapper, d leaderelection.RaceDecider) leaderelection.RaceDecider {
	ws, ok := d.(leaderelection.WriteSpacer)
	if !ok {
		return w
	}
	if n, push := w.(leaderelection.ChangeNotifier); push {
		return &struct {
			wrapper
			leaderelection.ChangeNotifier
			leaderelection.WriteSpacer
		}{w, n, ws}
	}
	return &struct {
		wrapper
		leaderelection.WriteSpacer
	}{w, ws}
}

type loggedDecider struct {
	d   leaderelection.RaceDecider
	log *storeLog
}

func (l *loggedDecider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	e, err := l.d.ReadCurrent(ctx)
	if err == nil {
		l.log.saw(e)
	}
	return e, err
}

func (l *loggedDecider) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	l.log.send(e)
	tok, err := l.d.WriteEntry(ctx, e)
	if err == nil {
		l.log.saw(e)
	}
	return tok, err
}

// String names the store it wraps, as Cuttable does.
func (l *loggedDecider) String() string { return nameOf(l.d) }

type loggedPush struct {
	*loggedDecider
	n leaderelection.ChangeNotifier
}

func (l *loggedPush) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	e, err := l.n.WaitForChange(ctx, tok)
	if err == nil {
		l.log.saw(e)
	}
	return e, err
}

// Cuttable returns an Access to d whose Cut makes every call fail as an
// unreachable store would (context.DeadlineExceeded) until it is restored.
// It forwards change notifications when d pushes them (a cut notifier fails
// too), and d's MinWriteInterval (leaderelection.WriteSpacer). A call in progress when a cut begins (a read, a write, a wait) has its
// context ended at once and fails, even if the cut is over before it returns
// (a write may then have been applied: its answer was lost).
func Cuttable(d leaderelection.RaceDecider) Access {
	c := &cuttable{d: d, cutCh: make(chan struct{})}
	if n, ok := d.(leaderelection.ChangeNotifier); ok {
		return Access{Decider: keepSpacer(&cuttablePush{c, n}, d), Cut: c.setCut}
	}
	return Access{Decider: keepSpacer(c, d), Cut: c.setCut}
}

type cuttable struct {
	d  leaderelection.RaceDecider
	mu sync.Mutex
	// cutCh is closed when a cut starts, and replaced when it ends.
	cutCh chan struct{}
	cut   bool
}

func (c *cuttable) setCut(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case cut && !c.cut:
		close(c.cutCh)
	case !cut && c.cut:
		c.cutCh = make(chan struct{})
	}
	c.cut = cut
}

// call runs f unless the store is cut off, and fails it if a cut started
// before its answer came; f's context ends at such a cut.
func call[T any](ctx context.Context, c *cuttable, f func(context.Context) (T, error)) (T, error) {
	var zero T
	c.mu.Lock()
	cutCh := c.cutCh
	c.mu.Unlock()
	cutOff := func() bool {
		select {
		case <-cutCh:
			return true
		default:
			return false
		}
	}
	if cutOff() {
		return zero, context.DeadlineExceeded
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-cutCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	v, err := f(ctx)
	if cutOff() {
		return zero, context.DeadlineExceeded
	}
	return v, err
}

func (c *cuttable) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	return call(ctx, c, c.d.ReadCurrent)
}

func (c *cuttable) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	return call(ctx, c, func(ctx context.Context) (entry.LeaderToken, error) { return c.d.WriteEntry(ctx, e) })
}

// String names the store it wraps, so that errors, logs and HealthCheck
// name the same election with or without the cut.
func (c *cuttable) String() string { return nameOf(c.d) }

// nameOf is d's String, or its type if it has none, as the engine names a
// store.
func nameOf(d leaderelection.RaceDecider) string {
	if s, ok := d.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", d)
}

type cuttablePush struct {
	*cuttable
	n leaderelection.ChangeNotifier
}

func (c *cuttablePush) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	return call(ctx, c.cuttable, func(ctx context.Context) (*entry.RaceEntry, error) { return c.n.WaitForChange(ctx, tok) })
}

// AcquireEnds campaigns on d (TermLength 2s, MaxClockSkew 100ms) and returns
// Acquire's error, for a test of a store that refuses for good: it fails the
// test if the candidate is elected, or if Acquire still campaigns after 10s
// (it must end, at once, with an error wrapping entry.ErrRefused).
func AcquireEnds(t testing.TB, d leaderelection.RaceDecider) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := leaderelection.Config{
		Decider: d, LeaderID: "refused", TermLength: 2 * time.Second, MaxClockSkew: 100 * time.Millisecond,
		OnElected: func(context.Context, *leaderelection.TimeView) { t.Errorf("elected on %v, which refuses", d) },
	}.Acquire(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Acquire still campaigning after 10s: %v", err)
	}
	return err
}

// CheckRefuses checks that d refuses for good, as a store that will not
// change its answer (a missing bucket, a TLS handshake that cannot succeed)
// must: a read, a first write and a campaign each end with an error that
// wraps entry.ErrRefused and says each of wants (see CheckRefusal).
func CheckRefuses(t *testing.T, d leaderelection.RaceDecider, wants ...string) {
	t.Helper()
	_, err := d.ReadCurrent(t.Context())
	CheckRefusal(t, "ReadCurrent", err, wants...)
	t.Logf("read: %v", err)
	_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "refused", WriteID: "w-0"})
	CheckRefusal(t, "WriteEntry (create)", err, wants...)
	CheckRefusal(t, "Acquire", AcquireEnds(t, d), wants...)
}

// CheckRefusal fails the test unless err, what a call of what returned,
// wraps entry.ErrRefused and says each of wants (the object's name, the
// endpoint, why): a store's refusal must stop the engine and tell an
// operator what to fix.
func CheckRefusal(t testing.TB, what string, err error, wants ...string) {
	t.Helper()
	if !errors.Is(err, entry.ErrRefused) {
		t.Errorf("%s: %v; want an error wrapping entry.ErrRefused", what, err)
		return
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}
