package kube

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
)

// Timing of the watch. A watch that the server or a network ends is
// re-opened from the last resourceVersion seen, so no change is missed; one
// that lived less than minWatch counts as a failure and is retried with
// backoff, so that a server or proxy that drops every watch at once cannot
// cause a request storm. The server ends each watch after a random
// timeout (timeoutSeconds). That close may never arrive (a connection that
// died silently where HTTP/2 health checks are off, a proxy that keeps the
// client's side open), and client-go sets no deadline of its own on a
// watch, so the watcher gives each one a deadline of its own, the server's
// timeout plus a margin, and also replaces one that has been silent for
// longer than the API server's watch cache lets one be: it sends a bookmark
// (requested) about every minute even when nothing changes.
const (
	minWatch         = time.Second
	requestTimeout   = 15 * time.Second
	recentVersionCap = 64
)

// waitReadTimeout bounds the GET a wait sends to place a token the watch has
// not seen (see WaitForChange). The backend does not know the term, from
// which the engine bounds its own reads (half of it: 7.5 s by default). A
// GET of one Lease is a single quorum read, which Kubernetes' latency SLO
// puts under 1 s at the 99th percentile; one that has not come in 5 s is
// hung (a connection dropped without a reset, a stalled proxy) or its
// server is in trouble. Failing then costs nothing but a poll: the wait's
// error vouches for nothing, and the engine reads on its own, with its own
// timeout, while waiting on would leave the waiter deaf to the watch's news
// until its context ends.
const waitReadTimeout = 5 * time.Second

// watchTiming is the timing of the watch (defaultWatchTiming; tests shorten
// it).
type watchTiming struct {
	// The server's timeout of each watch is drawn from [timeoutMin,
	// timeoutMax); the client ends it margin later if the server's close
	// has not arrived.
	timeoutMin, timeoutMax, margin time.Duration
	// silence is the longest a watch may go without an event or a
	// bookmark before it is replaced.
	silence time.Duration
	// grace is how long waiters wait for the watch to be re-established
	// after one ended (relisting after 410 Gone, re-opening) before
	// they report it down, so that the engine polls. Meanwhile a wait
	// that ends vouches for nothing: no watch is running.
	grace time.Duration
}

var defaultWatchTiming = watchTiming{
	timeoutMin: 4 * time.Minute,
	timeoutMax: 8 * time.Minute,
	margin:     30 * time.Second,
	silence:    150 * time.Second,
	grace:      2 * time.Second,
}

// defaultBackoff spaces out attempts to re-establish the watch: the first
// pause is drawn from [50 ms, 100 ms], each later one from a range twice as
// large, up to 10 s. A watch that stays up resets it.
var defaultBackoff = backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}

// WaitForChange implements leaderelection.ChangeNotifier. It blocks until
// the Lease is no longer at token's resourceVersion, then returns its record
// as ReadCurrent would.
//
// The first call starts a watch on the Lease (a LIST, then a WATCH with a
// field selector on its name) that runs until Close, and waits for its
// first attempt. Waiters are answered from the watch's events: a waiting
// candidate reads nothing from the API server. Only a token the watch has
// not seen (one older than the watch, or written so recently that its event
// has not arrived) costs a GET, to tell which of the two it is; so does a
// zero token (no Lease) while the watch has a Lease it did not list after
// the call began, since an absence has no resourceVersion to place in the
// watch's history (the Lease may be one deleted since, whose deletion the
// watch has yet to deliver). Each such GET waits for the watch to move on
// before the next, and one that takes over 5 s fails the wait (with an
// error that does not wrap ctx's), so that the engine polls.
//
// While the watch is down (until it is back, with capped jittered backoff),
// WaitForChange returns an error at once, so that the engine polls; so it
// does when a watch that ended is not replaced within a short grace. A wait
// that ctx ends while no watch is established (the watch still starting or
// being replaced, a GET under way) returns an error that does not wrap
// ctx's: it vouches for nothing, and the engine reads.
func (d *Decider) WaitForChange(ctx context.Context, token entry.LeaderToken) (*entry.RaceEntry, error) {
	// A ctx that has ended already is no shortcut: the answer still says
	// whether token is current, as far as the watch knows.
	began := time.Now()
	w, err := d.watcher()
	if err != nil {
		return nil, err
	}
	// confirmed: token is the stored version, per a read after the watch
	// began, when the watch was at version checked. vouched: the watch
	// knew token current at some point, so that a wait that ends finding
	// nothing new vouches that nothing changed.
	confirmed, vouched, checked := false, false, ""
	for {
		s, err := w.await(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case s.version() == token.Version:
			// Unchanged as far as the watch knows.
			vouched = true
		case s.listedAt.After(began):
			// A LIST sent since the call began (the watch's relist)
			// found another version than token, read before it: a
			// change, whether or not the watch saw token.
			return d.fromWatch(s.lease)
		case !token.IsZero() && s.recent[token.Version]:
			// The watch saw token and then what replaced it: events
			// arrive in order.
			return d.fromWatch(s.lease)
		case !confirmed || (token.IsZero() && s.version() != checked):
			rctx, cancel := context.WithTimeout(ctx, waitReadTimeout)
			e, err := d.ReadCurrent(rctx)
			cancel()
			if err != nil && ctx.Err() != nil {
				return nil, d.notWatched(ctx)
			}
			if err != nil && rctx.Err() != nil {
				// %v, not %w: the read's own deadline would pass
				// for the caller's, vouching that nothing changed.
				return nil, fmt.Errorf("kube: wait for a change of %s: reading the Lease to tell whether it is still at resourceVersion %q took over %s: %v",
					d.name, token.Version, waitReadTimeout, err)
			}
			if err != nil {
				return nil, err
			}
			if !e.Token.SameVersion(token) {
				return e, nil
			}
			// Current, but newer than the watch's news: its event
			// is on the way.
			confirmed, vouched, checked = true, true, s.version()
		}
		select {
		case <-ctx.Done():
			if !vouched || !w.unchanged(s.wake) {
				return nil, d.notWatched(ctx)
			}
			return nil, fmt.Errorf("kube: wait for a change of %s: %w", d.name, ctx.Err())
		case <-s.wake:
		}
	}
}

// notWatched is the error of a wait that ended before the watch could vouch
// for its token, or while no watch was established: not ctx's own, since it
// vouches for nothing (see leaderelection.ChangeNotifier), and the caller
// must read.
func (d *Decider) notWatched(ctx context.Context) error {
	return fmt.Errorf("kube: wait for a change of %s: ended (%v) with no watch established that could tell whether it changed", d.name, ctx.Err())
}

// fromWatch is the record of a Lease the watch delivered (nil: deleted).
func (d *Decider) fromWatch(l *coordinationv1.Lease) (*entry.RaceEntry, error) {
	if l == nil {
		return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
	}
	return d.toEntry(l)
}

// watcher returns d's watcher, starting it on first use.
func (d *Decider) watcher() (*watcher, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("kube: wait for a change of %s: the Decider is closed", d.name)
	}
	if d.w == nil {
		d.w = startWatcher(d)
	}
	return d.w, nil
}

type watchState int

const (
	connecting   watchState = iota // before the first attempt ended
	watching                       // a watch is established
	reconnecting                   // between watches, after one ended well
	down
	stopped
)

// between reports whether s is a state with no watch after one ended (or
// the first failed).
func (s watchState) between() bool { return s == down || s == reconnecting }

// snapshot is what a waiter needs from the watcher, taken under its lock.
type snapshot struct {
	lease    *coordinationv1.Lease // latest seen; nil when missing
	listedAt time.Time             // when the LIST that found lease was sent; zero: an event brought it
	recent   map[string]bool       // shared, read-only once published
	wake     <-chan struct{}
}

func (s snapshot) version() string {
	if s.lease == nil {
		return ""
	}
	return s.lease.ResourceVersion
}

// watcher keeps one watch on the Lease and wakes every waiter on each event
// and each change of state.
type watcher struct {
	d      *Decider
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	state    watchState
	err      error     // why it is down
	since    time.Time // when the last watch ended, while none is established
	lease    *coordinationv1.Lease
	listedAt time.Time       // see snapshot
	recent   map[string]bool // resourceVersions the watch has seen, newest few
	order    []string
	wake     chan struct{}
}

func startWatcher(d *Decider) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{d: d, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}), recent: map[string]bool{}}
	go w.run()
	return w
}

// await waits for the first attempt to end, and for a watch that ended to
// be replaced (for at most timing.grace), then returns the latest state, or
// an error while the watch is down.
func (w *watcher) await(ctx context.Context) (snapshot, error) {
	for {
		w.mu.Lock()
		state, err, since, wake := w.state, w.err, w.since, w.wake
		s := snapshot{lease: w.lease, listedAt: w.listedAt, recent: w.recent, wake: wake}
		w.mu.Unlock()
		var grace *time.Timer
		switch state {
		case watching:
			return s, nil
		case reconnecting:
			left := w.d.timing.grace - time.Since(since)
			if left <= 0 {
				return s, fmt.Errorf("kube: wait for a change of %s: no change notifications: the watch ended at %s and is not re-established yet",
					w.d.name, since.Format(time.RFC3339))
			}
			grace = time.NewTimer(left)
		case down:
			// %v, not %w: the watch's own error may wrap a deadline's,
			// which would pass for the caller's, vouching that nothing
			// changed.
			return s, fmt.Errorf("kube: wait for a change of %s: no change notifications: the watch is down since %s (re-establishing): %v",
				w.d.name, since.Format(time.RFC3339), err)
		case stopped:
			return s, fmt.Errorf("kube: wait for a change of %s: the Decider is closed", w.d.name)
		}
		var graceOver <-chan time.Time
		if grace != nil {
			graceOver = grace.C
		}
		select {
		case <-ctx.Done():
			return s, w.d.notWatched(ctx)
		case <-wake:
		case <-graceOver:
		}
		if grace != nil {
			grace.Stop()
		}
	}
}

// unchanged reports whether a watch is established now and nothing has
// happened since the snapshot whose wake channel is wake was taken (every
// change, of the Lease or of the state, closes and replaces it).
func (w *watcher) unchanged(wake <-chan struct{}) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == watching && w.wake == wake
}

// broadcast wakes every waiter. Call with w.mu held.
func (w *watcher) broadcast() {
	close(w.wake)
	w.wake = make(chan struct{})
}

func (w *watcher) setState(state watchState, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == stopped || (w.state == state && err == nil) {
		return
	}
	if state.between() && !w.state.between() {
		w.since = time.Now()
	}
	w.state, w.err = state, err
	w.broadcast()
}

// observe records l (nil: the Lease is missing) at resourceVersion rv as
// the latest, found by a LIST sent at listedAt (zero: brought by an event),
// and wakes the waiters. The map of recent versions is copied on write, so
// that waiters may read the one they hold without the lock.
func (w *watcher) observe(l *coordinationv1.Lease, rv string, listedAt time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lease, w.listedAt = l, listedAt
	if rv != "" && !w.recent[rv] {
		recent := make(map[string]bool, len(w.recent)+1)
		w.order = append(w.order, rv)
		if len(w.order) > recentVersionCap {
			w.order = w.order[len(w.order)-recentVersionCap:]
		}
		for _, v := range w.order {
			recent[v] = true
		}
		w.recent = recent
	}
	w.broadcast()
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	w.state = stopped
	w.broadcast()
	w.mu.Unlock()
}

// errGone is returned by watchFrom when the server no longer has the
// history since the resourceVersion asked for (410 Gone): list again.
var errGone = errors.New("resourceVersion too old (410 Gone)")

func (w *watcher) run() {
	defer close(w.done)
	b := w.d.backoff
	// ranWell: the last watch lived minWatch or more, and ended without
	// an error; the one after it reopens from where it was.
	rv, list, ranWell := "", true, false
	for {
		var err error
		if list {
			rv, err = w.list()
			list = err != nil
		}
		if err == nil {
			var lived time.Duration
			rv, lived, err = w.watchFrom(rv)
			reopened := ranWell
			ranWell = err == nil && lived >= minWatch
			switch {
			case errors.Is(err, errGone):
				// Expected now and then (the server keeps a few minutes
				// of history), in the stream of a watch that ran well
				// or as the answer to reopening one: list again at
				// once, unless it keeps happening.
				list = true
				if lived >= minWatch || reopened {
					b.Reset()
					w.setState(reconnecting, nil)
					continue
				}
			case ranWell:
				// Ended by a timeout (the server's or the watcher's
				// own), silence or a broken connection after a good
				// run: re-watch from where it was, at once.
				b.Reset()
				w.setState(reconnecting, nil)
				continue
			case err == nil:
				err = errors.New("the watch ended as soon as it began")
			}
		}
		if w.ctx.Err() != nil {
			return
		}
		w.setState(down, err)
		t := time.NewTimer(b.Next())
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// selector picks the one Lease out of its namespace.
func (d *Decider) selector() string {
	return fields.OneTermEqualSelector("metadata.name", d.lease).String()
}

// list reads the Lease with a LIST, whose resourceVersion the watch starts
// from, and publishes it.
func (w *watcher) list() (string, error) {
	ctx, cancel := context.WithTimeout(w.ctx, requestTimeout)
	defer cancel()
	sent, seq := time.Now(), w.d.sending()
	ls, err := w.d.leases.List(ctx, metav1.ListOptions{FieldSelector: w.d.selector()})
	if err != nil {
		return "", w.d.fail(ctx, "list", reqWatch, seq, err)
	}
	w.d.unauthorized.Store(0)
	var l *coordinationv1.Lease
	for i := range ls.Items {
		if ls.Items[i].Name == w.d.lease {
			l = &ls.Items[i]
		}
	}
	if l != nil {
		w.observe(l, l.ResourceVersion, sent)
	} else {
		w.observe(nil, "", sent)
	}
	return ls.ResourceVersion, nil
}

// watchFrom watches the Lease from resourceVersion rv until the watch ends,
// publishing each change. It returns the last resourceVersion seen, how
// long the watch lived, and why it ended: nil when the server or the
// connection ended it, or the watcher did (its deadline passed, or it was
// silent too long), errGone when rv is too old.
func (w *watcher) watchFrom(rv string) (string, time.Duration, error) {
	t := w.d.timing
	timeout := t.timeoutMin
	if t.timeoutMax > t.timeoutMin {
		timeout += rand.N(t.timeoutMax - t.timeoutMin)
	}
	timeoutSeconds := max(int64(timeout/time.Second), 1)
	// The server ends the watch after timeoutSeconds; the watcher ends it
	// itself a margin later, should that close never arrive. Opening it
	// is bounded by requestTimeout.
	ctx, cancel := context.WithTimeout(w.ctx, time.Duration(timeoutSeconds)*time.Second+t.margin)
	defer cancel()
	opening := time.AfterFunc(requestTimeout, cancel)
	sent := w.d.sending()
	wi, err := w.d.leases.Watch(ctx, metav1.ListOptions{
		FieldSelector:       w.d.selector(),
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeoutSeconds,
	})
	if !opening.Stop() && err == nil {
		err = fmt.Errorf("opening the watch took over %s", requestTimeout)
	}
	if err != nil {
		if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
			return rv, 0, errGone
		}
		if wi != nil {
			wi.Stop()
		}
		return rv, 0, w.d.fail(ctx, "watch", reqWatch, sent, err)
	}
	defer wi.Stop()
	w.d.unauthorized.Store(0)
	start := time.Now()
	w.setState(watching, nil)
	silence := time.NewTimer(t.silence)
	defer silence.Stop()
	// ended says why the watch ended, err unless the watcher ended it.
	ended := func(err error) (string, time.Duration, error) {
		switch {
		case w.ctx.Err() != nil:
			err = w.ctx.Err()
		case ctx.Err() != nil:
			err = nil // its deadline: replace it
		}
		return rv, time.Since(start), err
	}
	for {
		select {
		case <-ctx.Done():
			return ended(nil)
		case <-silence.C:
			// Not even a bookmark for this long: replace it.
			return ended(nil)
		case ev, ok := <-wi.ResultChan():
			if !ok || ctx.Err() != nil {
				return ended(nil)
			}
			silence.Reset(t.silence)
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok {
					continue
				}
				rv = l.ResourceVersion
				if ev.Type == watch.Deleted {
					w.observe(nil, rv, time.Time{})
				} else {
					w.observe(l, rv, time.Time{})
				}
			case watch.Bookmark:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					rv = l.ResourceVersion
				}
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
					return rv, time.Since(start), errGone
				}
				return ended(w.d.fail(ctx, "watch", reqWatch, sent, err))
			}
		}
	}
}
