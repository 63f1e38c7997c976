package leaderelection

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/racedecider/leaderelection/entry"
)

// Observer is told of what an election does: tenures that begin, are
// extended and end, every request to the store with its result and latency,
// the changes a watcher sees, and this host's clock offset to the store's.
// Set one per Config (Config.Observer) or WatchConfig (WatchConfig.Observer);
// nil, the default, costs nothing. The exporters leprom (Prometheus) and
// leotel (OpenTelemetry) and HealthCheck are Observers; Observers combines
// several.
//
// Observe runs on the engine's goroutines, sometimes on the path of an
// extension: it must be quick and must not block. It is called concurrently
// by every Acquire and Watch it is set on, several on one election included,
// and must be safe for that.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Observers returns an Observer that passes each event to every one of obs,
// in order, or nil if there is none. It leaves out nil ones, nil pointers
// (a *leprom.Observer whose New failed, say) and nil funcs included.
func Observers(obs ...Observer) Observer {
	var all multiObserver
	for _, o := range obs {
		if !isNil(o) {
			all = append(all, o)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

type multiObserver []Observer

func (m multiObserver) Observe(e Event) {
	for _, o := range m {
		o.Observe(e)
	}
}

// EventKind says what an Event reports, and so which of its fields are set.
type EventKind int

// The kinds of Event. The name in parentheses is what String returns.
const (
	// EventElected (elected): this candidate began a tenure. LeaderID,
	// Term and Expiry describe it.
	EventElected EventKind = iota + 1
	// EventExtended (extended): this candidate extended its term to
	// Expiry.
	EventExtended
	// EventOusted (ousted): this candidate's tenure ended, for Reason;
	// OnElected has returned. Err is set when Reason is OustRefused.
	EventOusted
	// EventLeaderChanged (leader_changed): a candidate saw a new tenure
	// in the record, its own included (LeaderID, Term, Expiry): what
	// Config.LeaderChanged is told.
	EventLeaderChanged
	// EventStoreRequest (store_request): one request to the store
	// returned: Op, Result, Latency, and Err unless Result is ResultOK.
	EventStoreRequest
	// EventWatchChange (watch_change): Watch reported Change about the
	// record's LeaderID, Term and Expiry.
	EventWatchChange
	// EventClockOffset (clock_offset): a write (or a read) gave a new
	// sample of this host's clock offset to the store's clock; Offset is
	// the bound all recent samples agree on.
	EventClockOffset
	// EventClockWarning (clock_warning): Offset shows this host's clock
	// further than MaxClockSkew/4 from the store's; Err says by how much.
	// It is sent when the bound first crosses that line, not on every
	// sample.
	EventClockWarning
	// EventStopped (stopped): Acquire returned Err (ctx's error when it
	// was stopped). Not sent for an invalid Config, which Acquire returns
	// before it campaigns (see Config.Validate).
	EventStopped
	// EventStarted (started): Acquire began to campaign, its Config
	// valid; EventStopped follows when it returns.
	EventStarted
	// EventPaused (paused): OnElected returned while the term was held,
	// and this candidate waits until Expiry before campaigning again (see
	// Config.Acquire); it makes no request meanwhile.
	EventPaused
	// EventWatchStarted (watch_started): Watch began to follow the
	// election, its WatchConfig valid; EventWatchStopped follows when it
	// returns.
	EventWatchStarted
	// EventWatchStopped (watch_stopped): Watch returned Err (ctx's error
	// when it was stopped).
	EventWatchStopped
)

func (k EventKind) String() string {
	switch k {
	case EventElected:
		return "elected"
	case EventExtended:
		return "extended"
	case EventOusted:
		return "ousted"
	case EventLeaderChanged:
		return "leader_changed"
	case EventStoreRequest:
		return "store_request"
	case EventWatchChange:
		return "watch_change"
	case EventClockOffset:
		return "clock_offset"
	case EventClockWarning:
		return "clock_warning"
	case EventStopped:
		return "stopped"
	case EventStarted:
		return "started"
	case EventPaused:
		return "paused"
	case EventWatchStarted:
		return "watch_started"
	case EventWatchStopped:
		return "watch_stopped"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// OustReason says why a tenure ended. The values are short, fixed strings,
// fit for metric labels.
type OustReason string

// The reasons a tenure ends.
const (
	// OustReleased: OnElected returned while the term was held; the term
	// is released. (For this reason, OustShutdown and OustClockSkew, the
	// release is written after EventOusted is sent.)
	OustReleased OustReason = "released"
	// OustShutdown: Acquire's context ended; the term is released unless
	// DisableRelease (or the release fails, leaving it to expire).
	OustShutdown OustReason = "shutdown"
	// OustExpired: the term ran out before an extension landed.
	OustExpired OustReason = "expired"
	// OustSuperseded: another candidate holds the record.
	OustSuperseded OustReason = "superseded"
	// OustRefused: the store refused an extension for good (ErrRefused).
	OustRefused OustReason = "refused"
	// OustClockSkew: with Config.EnforceMaxClockSkew, this host learnt
	// that its clock is too far from the store's; the term is released.
	// An OnElected that returns at the instant this is learnt ends the
	// tenure first (OustReleased).
	OustClockSkew OustReason = "clock_skew"
)

// StoreOp names a kind of request to the store.
type StoreOp string

// The requests the engine makes.
const (
	OpRead  StoreOp = "read"
	OpWrite StoreOp = "write"
	// OpWait: a wait on the Decider's push channel (ChangeNotifier). Its
	// Latency is how long nothing changed, not the store's speed, so
	// exporters keep it out of latency histograms. ResultOK: a change came,
	// or the channel vouched that none did; ResultError: the channel failed
	// and the engine polls instead.
	OpWait StoreOp = "wait"
)

// StoreResult is the class of a store's answer, as the engine acts on it.
type StoreResult string

// The results of a store request.
const (
	// ResultOK: the request succeeded.
	ResultOK StoreResult = "ok"
	// ResultRaceLost: a write lost its race (ErrRaceLost): another
	// writer got there first. Expected in every election.
	ResultRaceLost StoreResult = "race_lost"
	// ResultThrottled: the store asked to slow down (ErrThrottled).
	ResultThrottled StoreResult = "throttled"
	// ResultRefused: the store refused for good (ErrRefused).
	ResultRefused StoreResult = "refused"
	// ResultUnknown: a write whose outcome is unknown (a timeout, a reset,
	// a 5xx); the engine reads it back.
	ResultUnknown StoreResult = "unknown"
	// ResultError: a read failed (including a record that does not
	// decode); it is retried.
	ResultError StoreResult = "error"
	// ResultCanceled: the caller's context ended during the request.
	ResultCanceled StoreResult = "canceled"
)

// Event is one report to an Observer. Kind says which fields are set; the
// others are zero.
type Event struct {
	Kind EventKind
	// Election names the store and record the election runs on: the
	// Decider's String, or its type if it has none. It is valid UTF-8
	// (in a String that is not, other bytes are written \xNN and
	// backslashes \\), so that it can be a metric label.
	Election string
	// LeaderID, Term and Expiry describe a tenure: this candidate's for
	// EventElected, EventExtended and EventOusted, the record's for
	// EventLeaderChanged and EventWatchChange. LeaderID is this
	// candidate's for EventStarted, EventStopped and EventPaused; for
	// EventPaused, Expiry is when the pause ends.
	LeaderID string
	Term     int64
	Expiry   time.Time
	// Reason is why a tenure ended (EventOusted).
	Reason OustReason
	// Change is what a watcher saw (EventWatchChange).
	Change ChangeKind
	// Op, Result and Latency describe a store request (EventStoreRequest).
	Op      StoreOp
	Result  StoreResult
	Latency time.Duration
	// Offset bounds this host's clock offset to the store's
	// (EventClockOffset, EventClockWarning).
	Offset ClockOffset
	// Err is the error behind the event, if any.
	Err error
}

// ClockOffset bounds the offset of the store's clock from this host's: the
// store's clock read this host's plus an offset within [Low, High]. A write
// sent at local time t0, answered at t1 and committed at store time c gives
// c - t1 <= offset <= c - t0, widened by the precision p of c (a second for
// stores that report whole seconds): by p below, as c may be rounded, and by
// 2p above, as c may be truncated and, when it is an HTTP Date header, taken
// from a cache refreshed once a second. A read gives only the lower bound
// (the record it returns was committed before it answered). The bound is
// the intersection of the recent samples.
type ClockOffset struct {
	Low, High time.Duration
	// Samples is how many samples the bound rests on; zero means nothing
	// is known, and then Low and High are zero too.
	Samples int
	// HighKnown is false while only reads have given samples: then High is
	// unbounded (and reported as the largest Duration).
	HighKnown bool
}

// Known reports whether any sample bounds the offset.
func (o ClockOffset) Known() bool { return o.Samples > 0 }

// AtLeast is how far from the store's clock this host's is known to be, at
// least: zero when the bound contains zero.
func (o ClockOffset) AtLeast() time.Duration {
	switch {
	case !o.Known():
		return 0
	case o.Low > 0:
		return o.Low
	case o.HighKnown && o.High < 0:
		return -o.High
	}
	return 0
}

// String formats the bound, as "[-3ms, +12ms]".
func (o ClockOffset) String() string {
	if !o.Known() {
		return "unknown"
	}
	high := "+inf"
	if o.HighKnown {
		high = signed(o.High)
	}
	return "[" + signed(o.Low) + ", " + high + "]"
}

func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// clockSamples is how many recent samples the offset bound intersects.
const clockSamples = 16

// clockCheck keeps the recent offset samples of one candidate.
type clockCheck struct {
	// maxAge drops samples older than this: clocks drift, and a candidate
	// that stopped campaigning for its offset needs to try again once its
	// evidence is old.
	maxAge  time.Duration
	samples [clockSamples]offsetSample
	n       int // samples held, newest last in ring order
	next    int
	warned  bool
	// precision is the finest commit time precision seen yet (0: none
	// seen): a store that reported milliseconds once does so always.
	precision time.Duration
	seen      bool
}

type offsetSample struct {
	at        time.Time
	low, high time.Duration
	highKnown bool
}

// commitPrecision infers the precision of a store's commit time from its
// value: stores that keep whole seconds (S3's Last-Modified, HTTP Date)
// report none below, GCS reports milliseconds, PostgreSQL microseconds. A
// finer clock that happens to land on a whole unit is only bounded more
// loosely than it could be, until a finer reading shows what it is (see
// clockCheck.precision).
func commitPrecision(c time.Time) time.Duration {
	ns := c.Nanosecond()
	switch {
	case ns == 0:
		return time.Second
	case ns%int(time.Millisecond) == 0:
		return time.Millisecond
	case ns%int(time.Microsecond) == 0:
		return time.Microsecond
	}
	return 0
}

// add records a sample: a request sent at t0 and answered at t1 saw commit
// time c. write says whether the request wrote c (else it read a record
// committed earlier, which bounds the offset from below only). It returns
// the new bound, and false if the sample was not kept: a read that does not
// raise the lower bound tells nothing new, and would only push out the
// write samples that bound the offset from above.
func (cc *clockCheck) add(t0, t1, c time.Time, write bool) (ClockOffset, bool) {
	p := commitPrecision(c)
	if cc.seen {
		p = min(p, cc.precision)
	}
	cc.precision, cc.seen = p, true
	// A commit time may be rounded to its precision (so the true one is
	// up to p later or earlier) or truncated; an HTTP Date header may also
	// come from a cache refreshed once a second (fasthttp's, which
	// versitygw serves): up to 2p earlier than the truth, never later.
	s := offsetSample{at: t1, low: c.Sub(t1) - p, high: maxDuration, highKnown: write}
	if write {
		s.high = c.Sub(t0) + 2*p
	}
	cc.prune(t1)
	if cur, _ := cc.intersect(offsetSample{low: minDuration, high: maxDuration}); !write && cur.Known() && s.low <= cur.Low {
		return cur, false
	}
	if _, ok := cc.intersect(s); !ok {
		// This sample contradicts the others: a clock was stepped or
		// the store's changed. Start again from it alone.
		cc.n = 0
	}
	cc.samples[cc.next] = s
	cc.next = (cc.next + 1) % clockSamples
	cc.n = min(cc.n+1, clockSamples)
	o, _ := cc.intersect(offsetSample{low: minDuration, high: maxDuration})
	return o, true
}

// bound returns the current bound, after dropping samples too old at now.
func (cc *clockCheck) bound(now time.Time) ClockOffset {
	cc.prune(now)
	o, _ := cc.intersect(offsetSample{low: minDuration, high: maxDuration})
	return o
}

const (
	minDuration = time.Duration(-1 << 63)
	maxDuration = time.Duration(1<<63 - 1)
)

// prune forgets samples older than maxAge at now.
func (cc *clockCheck) prune(now time.Time) {
	for cc.n > 0 {
		oldest := cc.samples[(cc.next-cc.n+clockSamples)%clockSamples]
		if cc.maxAge <= 0 || now.Sub(oldest.at) <= cc.maxAge {
			return
		}
		cc.n--
	}
}

// intersect intersects the held samples with s, reporting whether the
// result is non-empty.
func (cc *clockCheck) intersect(s offsetSample) (ClockOffset, bool) {
	o := ClockOffset{Low: s.low, High: s.high, HighKnown: s.highKnown}
	for i := range cc.n {
		x := cc.samples[(cc.next-1-i+clockSamples)%clockSamples]
		o.Low = max(o.Low, x.low)
		if x.highKnown {
			o.High = min(o.High, x.high)
			o.HighKnown = true
		}
		o.Samples++
	}
	if o.Samples == 0 {
		return ClockOffset{}, true
	}
	if !o.HighKnown {
		o.High = maxDuration
	}
	return o, o.Low <= o.High
}

// hook carries an Observer into the engine's store calls. A nil *hook is
// valid and does nothing, so that an election without an Observer pays
// nothing but a nil check; clock, when set, also collects offset samples.
type hook struct {
	o        Observer
	election string
	clock    *clockCheck
	// skew is MaxClockSkew: the clock warning is sent past skew/4.
	skew time.Duration
	log  *slog.Logger
	// offset is the last bound, kept for the campaign's checks.
	offset ClockOffset
}

// newHook returns the hook for an election on d, or nil when there is
// nothing to tell and no clock to check.
func newHook(o Observer, d RaceDecider, check bool, skew, maxAge time.Duration, log *slog.Logger) *hook {
	if o == nil && !check {
		return nil
	}
	h := &hook{o: o, election: storeName(d), skew: skew, log: log}
	if check {
		h.clock = &clockCheck{maxAge: maxAge}
	}
	return h
}

func (h *hook) send(e Event) {
	if h == nil || h.o == nil {
		return
	}
	e.Election = h.election
	h.o.Observe(e)
}

// request reports one store request that returned err after took; ctxErr
// is the caller's context's error then.
func (h *hook) request(op StoreOp, took time.Duration, err, ctxErr error) {
	if h == nil || h.o == nil {
		return
	}
	h.send(Event{Kind: EventStoreRequest, Op: op, Result: resultOf(op, err, ctxErr), Latency: took, Err: err})
}

func resultOf(op StoreOp, err, ctxErr error) StoreResult {
	switch {
	case err == nil:
		return ResultOK
	case ctxErr != nil:
		return ResultCanceled
	case isRefused(err):
		return ResultRefused
	case isThrottled(err):
		return ResultThrottled
	case isRaceLost(err):
		return ResultRaceLost
	case op == OpWrite:
		return ResultUnknown
	}
	return ResultError
}

// sample takes note of a commit time seen by a request sent at t0 and
// answered at t1.
func (h *hook) sample(t0, t1 time.Time, tok entry.LeaderToken, write bool) {
	if h == nil || h.clock == nil || tok.CommitTime.IsZero() {
		return
	}
	var kept bool
	if h.offset, kept = h.clock.add(t0, t1, tok.CommitTime, write); !kept {
		return
	}
	h.send(Event{Kind: EventClockOffset, Offset: h.offset})
	far := h.skew > 0 && h.offset.AtLeast() > h.skew/4
	if far && !h.clock.warned {
		err := fmt.Errorf("leaderelection: this host's clock is at least %s from the store's (offset %s), more than MaxClockSkew/4 (%s)",
			h.offset.AtLeast(), h.offset, h.skew/4)
		h.log.Warn(err.Error()) // a candidate's logger, which names the store
		h.send(Event{Kind: EventClockWarning, Offset: h.offset, Err: err})
	}
	h.clock.warned = far
}

// tooFar reports whether, at now, this host's clock is known to be more
// than MaxClockSkew/2 from the store's (see Config.EnforceMaxClockSkew).
func (h *hook) tooFar(now time.Time) bool {
	if h == nil || h.clock == nil || h.skew <= 0 {
		return false
	}
	h.offset = h.clock.bound(now)
	return h.offset.AtLeast() > h.skew/2
}

// committedBy returns the latest instant, on this host's clock, at which the
// store can have committed a record whose commit time it reported as c, and
// false if the clock check does not know (no check, no samples, no c): c
// less the least offset the samples allow, plus c's precision.
func (h *hook) committedBy(c, now time.Time) (time.Time, bool) {
	if h == nil || h.clock == nil || c.IsZero() {
		return time.Time{}, false
	}
	o := h.clock.bound(now)
	if !o.Known() {
		return time.Time{}, false
	}
	return c.Add(-o.Low + h.clock.precision), true
}

// errClockSkew is the error an ousting for clock skew reports.
var errClockSkew = errors.New("leaderelection: this host's clock is further than MaxClockSkew/2 from the store's")

// stopped reports the end of the Acquire of candidate id.
func (h *hook) stopped(id string, err error) {
	h.send(Event{Kind: EventStopped, LeaderID: id, Err: err})
}
