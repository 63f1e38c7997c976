package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

// opKind tells reads from writes in the operation log.
type opKind uint8

const (
	opRead opKind = iota
	opWrite
)

// opEvent is one request sent to the store.
type opEvent struct {
	at   time.Time
	kind opKind
}

// election is one election object on one backend, shared by every access to
// it. It logs every request sent, so that a scenario can count the traffic in
// any window.
type election struct {
	inner    leaderelection.RaceDecider
	notifier leaderelection.ChangeNotifier // nil: the accesses poll
	// peer, if set, makes each access a Decider of its own on inner's
	// election, as a separate process has (a listener or watch of its
	// own); peers are those made, for close.
	peer    func() (leaderelection.RaceDecider, error)
	peers   []leaderelection.RaceDecider
	peerErr error
	push    bool
	latency time.Duration // added to every request, half each way
	rtt     *rttLog       // the backend's, shared by its elections

	// done ends the deliveries of requests held by a cut that never ends.
	done   context.Context
	cancel context.CancelFunc

	mu  sync.Mutex
	ops []opEvent
}

func newElection(inner leaderelection.RaceDecider, push bool, latency time.Duration, rtt *rttLog) *election {
	el := &election{inner: inner, latency: latency, rtt: rtt, push: push}
	el.notifier = el.notifierOf(inner)
	el.done, el.cancel = context.WithCancel(context.Background())
	return el
}

// notifierOf is d's push channel, if the election uses push.
func (el *election) notifierOf(d leaderelection.RaceDecider) leaderelection.ChangeNotifier {
	if !el.push {
		return nil
	}
	n, _ := d.(leaderelection.ChangeNotifier)
	return n
}

func (el *election) logOp(k opKind) {
	el.mu.Lock()
	el.ops = append(el.ops, opEvent{at: time.Now(), kind: k})
	el.mu.Unlock()
}

// opsBetween counts the reads and writes sent in [from, to].
func (el *election) opsBetween(from, to time.Time) (reads, writes int) {
	el.mu.Lock()
	defer el.mu.Unlock()
	for _, o := range el.ops {
		if o.at.Before(from) || o.at.After(to) {
			continue
		}
		if o.kind == opRead {
			reads++
		} else {
			writes++
		}
	}
	return reads, writes
}

// busiest returns the largest number of requests sent within any window of
// length w inside [from, to].
func (el *election) busiest(from, to time.Time, w time.Duration) int {
	return el.busiestOf(from, to, w, func(opKind) bool { return true })
}

// busiestWrites returns the largest number of writes sent within any window
// of length w.
func (el *election) busiestWrites(w time.Duration) int {
	return el.busiestOf(time.Time{}, time.Now(), w, func(k opKind) bool { return k == opWrite })
}

func (el *election) busiestOf(from, to time.Time, w time.Duration, keep func(opKind) bool) int {
	el.mu.Lock()
	var ts []time.Time
	for _, o := range el.ops {
		if keep(o.kind) && !o.at.Before(from) && !o.at.After(to) {
			ts = append(ts, o.at)
		}
	}
	el.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// rttLog collects the round-trip times of successful requests.
type rttLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (r *rttLog) add(d time.Duration) {
	r.mu.Lock()
	r.d = append(r.d, d)
	r.mu.Unlock()
}

func (r *rttLog) median() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), r.d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// cutMode says what happens to the requests of an access that is cut off.
type cutMode int

const (
	connected cutMode = iota
	// cutDrop: requests and replies are lost; the caller waits until its
	// context ends. A crashed or abandoned process.
	cutDrop
	// cutHold: requests wait until the cut ends and are then delivered,
	// even those whose caller has given up. A network partition (or a
	// paused process) whose queued writes arrive late.
	cutHold
)

// acceptedWrite is a write of one access that the store applied.
type acceptedWrite struct {
	at   time.Time
	e    *entry.RaceEntry
	late bool // delivered after its caller had given up
}

// access is one client's connection to an election: it adds the latency,
// counts the requests and can be cut off.
type access struct {
	el   *election
	name string
	// inner and notifier are the election's, or the access's own peer.
	inner    leaderelection.RaceDecider
	notifier leaderelection.ChangeNotifier

	reads, writes, waits atomic.Int64
	lateSent             atomic.Int64 // held writes delivered after their caller gave up
	// everCut is set once the access has been cut off: a tenure it ends
	// is lost to the scenario's fault, not the engine's.
	everCut atomic.Bool

	mu       sync.Mutex
	mode     cutMode
	restored chan struct{} // closed when the current cut ends
	accepted []acceptedWrite
}

// newAccess makes an access for one candidate or watcher. Should its peer
// fail to be made, it uses the election's Decider, and the failure is
// reported when the cluster closes (peerErr).
func (el *election) newAccess(name string) *access {
	a := &access{el: el, name: name, inner: el.inner, notifier: el.notifier}
	if el.peer == nil {
		return a
	}
	d, err := el.peer()
	el.mu.Lock()
	defer el.mu.Unlock()
	if err != nil {
		el.peerErr = errors.Join(el.peerErr, fmt.Errorf("a Decider of its own for %s: %w", name, err))
		return a
	}
	el.peers = append(el.peers, d)
	a.inner, a.notifier = d, el.notifierOf(d)
	return a
}

// String names the store as the store itself does, so that what the engine
// logs and reports in a bench run reads as it would on the store.
func (a *access) String() string {
	if s, ok := a.el.inner.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", a.el.inner)
}

// decider returns the RaceDecider a candidate or watcher uses: with
// WaitForChange when the election pushes changes.
func (a *access) decider() leaderelection.RaceDecider {
	if a.notifier != nil {
		return pushAccess{a}
	}
	if ws, ok := a.inner.(leaderelection.WriteSpacer); ok && ws.MinWriteInterval() > 0 {
		return spacedAccess{a, ws.MinWriteInterval()}
	}
	return a
}

// spacedAccess passes on the store's write interval (gcs declares Cloud
// Storage's), as a candidate on the store itself would see it.
type spacedAccess struct {
	*access
	interval time.Duration
}

// MinWriteInterval implements leaderelection.WriteSpacer.
func (s spacedAccess) MinWriteInterval() time.Duration { return s.interval }

// cut cuts the access off (mode cutDrop or cutHold) or, with connected,
// restores it.
func (a *access) cut(mode cutMode) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if mode == a.mode {
		return
	}
	if a.mode != connected {
		close(a.restored)
	}
	a.mode = mode
	if mode != connected {
		a.everCut.Store(true)
		a.restored = make(chan struct{})
	}
}

// gate lets a request through at once when the access is connected. When it
// is cut, the request waits for the cut to end (cutHold) or is lost (cutDrop);
// a caller whose ctx ends first gets an error. late, if not nil, is run when
// a held request is delivered after its caller gave up.
func (a *access) gate(ctx context.Context, late func(context.Context)) error {
	a.mu.Lock()
	mode, restored := a.mode, a.restored
	a.mu.Unlock()
	if mode == connected {
		return nil
	}
	select {
	case <-restored:
		if mode == cutHold {
			return nil
		}
		<-ctx.Done()
	case <-ctx.Done():
		if mode == cutHold && late != nil {
			go func() {
				select {
				case <-restored:
					lctx, cancel := context.WithTimeout(a.el.done, 10*time.Second)
					defer cancel()
					late(lctx)
				case <-a.el.done.Done():
				}
			}()
		}
	}
	return fmt.Errorf("bench: %s is cut off: %w", a.name, ctx.Err())
}

// travelUntil waits until t, as a request or its reply travels, then passes
// the gate. Each leg ends at a deadline counted from the start of the
// request, so that the timer's granularity is paid once per leg, not summed.
func (a *access) travelUntil(ctx context.Context, t time.Time, late func(context.Context)) error {
	if d := time.Until(t); d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return fmt.Errorf("bench: %s: %w", a.name, ctx.Err())
		}
	}
	return a.gate(ctx, late)
}

// ReadCurrent implements leaderelection.RaceDecider.
func (a *access) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	a.reads.Add(1)
	a.el.logOp(opRead)
	start := time.Now()
	if err := a.gate(ctx, nil); err != nil {
		return nil, err
	}
	lat := a.el.latency
	sent := time.Now()
	if err := a.travelUntil(ctx, sent.Add(lat/2), nil); err != nil {
		return nil, err
	}
	t := time.Now()
	rec, err := a.inner.ReadCurrent(ctx)
	if terr := a.travelUntil(ctx, sent.Add(lat+time.Since(t)), nil); terr != nil {
		return nil, terr
	}
	if err == nil {
		a.el.rtt.add(time.Since(start))
	}
	return rec, err
}

// WriteEntry implements leaderelection.RaceDecider.
func (a *access) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	a.writes.Add(1)
	a.el.logOp(opWrite)
	start := time.Now()
	e = e.Clone() // a held write may be delivered after the caller moved on
	late := func(ctx context.Context) {
		a.lateSent.Add(1)
		a.apply(ctx, e, true)
	}
	if err := a.gate(ctx, late); err != nil {
		return entry.LeaderToken{}, err
	}
	lat := a.el.latency
	sent := time.Now()
	if err := a.travelUntil(ctx, sent.Add(lat/2), late); err != nil {
		return entry.LeaderToken{}, err
	}
	t := time.Now()
	tok, err := a.apply(ctx, e, false)
	if terr := a.travelUntil(ctx, sent.Add(lat+time.Since(t)), nil); terr != nil {
		return entry.LeaderToken{}, terr
	}
	if err == nil {
		a.el.rtt.add(time.Since(start))
	}
	return tok, err
}

func (a *access) apply(ctx context.Context, e *entry.RaceEntry, late bool) (entry.LeaderToken, error) {
	tok, err := a.inner.WriteEntry(ctx, e)
	if err == nil {
		a.mu.Lock()
		a.accepted = append(a.accepted, acceptedWrite{at: time.Now(), e: e, late: late})
		a.mu.Unlock()
	}
	return tok, err
}

// lastAccepted returns the last write of this access the store applied, or
// nil.
func (a *access) lastAccepted() *entry.RaceEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.accepted) == 0 {
		return nil
	}
	return a.accepted[len(a.accepted)-1].e
}

// acceptedSince returns the writes of this access applied after t.
func (a *access) acceptedSince(t time.Time) []acceptedWrite {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []acceptedWrite
	for _, w := range a.accepted {
		if w.at.After(t) {
			out = append(out, w)
		}
	}
	return out
}

// counts returns the requests sent so far.
func (a *access) counts() opCounts {
	return opCounts{reads: a.reads.Load(), writes: a.writes.Load(), waits: a.waits.Load()}
}

type opCounts struct{ reads, writes, waits int64 }

func (c opCounts) sub(o opCounts) opCounts {
	return opCounts{reads: c.reads - o.reads, writes: c.writes - o.writes, waits: c.waits - o.waits}
}

// pushAccess is an access to a backend that pushes changes.
type pushAccess struct{ *access }

// WaitForChange implements leaderelection.ChangeNotifier. The pushed record
// reaches the caller half the added latency after the change.
func (p pushAccess) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	p.waits.Add(1)
	if err := p.gate(ctx, nil); err != nil {
		return nil, err
	}
	rec, err := p.notifier.WaitForChange(ctx, tok)
	if err != nil {
		return nil, err
	}
	if err := p.travelUntil(ctx, time.Now().Add(p.el.latency/2), nil); err != nil {
		return nil, err
	}
	return rec, nil
}
