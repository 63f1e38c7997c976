// Package leprom exports what leader elections do as Prometheus metrics.
//
// New registers the metrics on the Registerer it is given (never on the
// global one) and returns a leaderelection.Observer: set it as the Observer
// of every Config and WatchConfig to export. Every metric carries the
// election label (the store and record the election runs on); leader ids
// appear only in leader_info, which holds the current leader alone, so that
// cardinality stays bounded by the number of elections.
//
//	leaderelection_is_leader{election}                       1 while this process leads
//	leaderelection_fencing_token{election}                   Term of the newest tenure seen
//	leaderelection_term_expiry_timestamp_seconds{election}   its TermExpiry, Unix seconds (*)
//	leaderelection_leader_info{election,leader_id}           1 for the current leader
//	leaderelection_transitions_total{election,reason}        elected, released, shutdown, expired, superseded, refused, clock_skew
//	leaderelection_store_requests_total{election,op,result}  op read|write|wait; result ok, race_lost, throttled, refused, unknown, error, canceled
//	leaderelection_store_request_duration_seconds{election,op}
//	leaderelection_watch_changes_total{election,kind}        elected, extended, released, expired, deleted
//	leaderelection_clock_offset_seconds{election,bound}      bound low|high: the store's clock minus this host's
//	leaderelection_clock_warnings_total{election}            offset bound past MaxClockSkew/4
//
// (*) As last reported: the leader and a Watch report each extension, a
// waiting candidate only the tenure's start. Events about a tenure older
// than the newest seen (a Watch behind a candidate in the same process)
// change no gauge.
//
// fencing_token, term_expiry_timestamp_seconds, leader_info and
// clock_offset_seconds describe what this process sees while an Acquire or
// a Watch of it follows the election, and lose their series when the last
// one returns: what they showed may be long out of date. is_leader stays,
// at 0. is_leader is 1 while any tenure of this process runs, however many
// Acquire calls it makes on the election.
//
// Metrics only report; the safety of an election rests on the engine (see
// the leaderelection package). An alert on sum(leaderelection_is_leader) > 1
// over an election's candidates catches a broken clock assumption only
// after the fact, and only as well as scrapes line up.
package leprom

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/racedecider/leaderelection"
)

// Options adjusts the exported metrics. The zero value is the default.
type Options struct {
	// ConstLabels are added to every metric (a job or shard name, say).
	ConstLabels prometheus.Labels
	// Buckets are the store request latency histogram's buckets, in
	// seconds. Nil means DefaultBuckets.
	Buckets []float64
}

// DefaultBuckets span store round trips from a local disk's (a
// millisecond) to a slow object store's under retry (tens of seconds).
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Observer is a leaderelection.Observer that updates Prometheus metrics.
// It is safe for concurrent use by any number of elections.
type Observer struct {
	isLeader, fencingToken, termExpiry, leaderInfo, clockOffset *prometheus.GaugeVec
	transitions, requests, watchChanges, clockWarnings          *prometheus.CounterVec
	duration                                                    *prometheus.HistogramVec

	mu sync.Mutex
	// leaders is the leader id leader_info shows per election.
	leaders map[string]string
	// terms is the Term of the newest tenure seen per election: an event
	// about an older one (a watcher behind a candidate in the same
	// process) is stale, and changes no gauge.
	terms map[string]int64
	// following counts the Acquire and Watch calls running per election,
	// leading the tenures of this process running.
	following, leading map[string]int
}

var _ leaderelection.Observer = (*Observer)(nil)

const namespace = "leaderelection"

// New creates the metrics, registers them on reg and returns the Observer
// that updates them. It fails if reg already holds metrics of these names
// (an Observer is meant to be shared by every election of a process).
func New(reg prometheus.Registerer, opts Options) (*Observer, error) {
	if reg == nil {
		return nil, errors.New("leprom: nil Registerer (pass prometheus.DefaultRegisterer to use the global one)")
	}
	if _, ok := opts.ConstLabels["le"]; ok {
		// client_golang refuses it only when it makes the histogram,
		// as with the buckets below.
		return nil, errors.New(`leprom: Options.ConstLabels: "le" is the latency histogram's bucket label`)
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	// client_golang checks buckets only when it makes a histogram, on the
	// first request observed: a panic on the engine's goroutine.
	for i := 1; i < len(buckets); i++ {
		if !(buckets[i] > buckets[i-1]) {
			return nil, fmt.Errorf("leprom: Options.Buckets %v: must increase strictly (%v after %v)", buckets, buckets[i], buckets[i-1])
		}
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help, ConstLabels: opts.ConstLabels},
			append([]string{"election"}, labels...))
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help, ConstLabels: opts.ConstLabels},
			append([]string{"election"}, labels...))
	}
	o := &Observer{
		isLeader:     gauge("is_leader", "1 while this process leads the election (OnElected runs), else 0."),
		fencingToken: gauge("fencing_token", "The fencing token (Term) of the newest tenure this process has seen."),
		termExpiry:   gauge("term_expiry_timestamp_seconds", "When the newest tenure seen ends unless extended, as Unix seconds on its leader's clock."),
		leaderInfo:   gauge("leader_info", "1 for the current leader's id; only the current leader has a series.", "leader_id"),
		clockOffset: gauge("clock_offset_seconds",
			"Bounds on the store's clock minus this host's, from the commit times of recent writes and reads.", "bound"),
		transitions: counter("transitions_total", "Tenures of this process begun (reason elected) and ended, by reason.", "reason"),
		requests:    counter("store_requests_total", "Requests to the store, by operation and result.", "op", "result"),
		watchChanges: counter("watch_changes_total",
			"Changes a watcher reported, by kind.", "kind"),
		clockWarnings: counter("clock_warnings_total",
			"Times the clock offset bound went past MaxClockSkew/4."),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "store_request_duration_seconds",
			Help: "Latency of requests to the store, by operation.", ConstLabels: opts.ConstLabels, Buckets: buckets},
			[]string{"election", "op"}),
		leaders:   map[string]string{},
		terms:     map[string]int64{},
		following: map[string]int{},
		leading:   map[string]int{},
	}
	all := []prometheus.Collector{o.isLeader, o.fencingToken, o.termExpiry, o.leaderInfo, o.clockOffset,
		o.transitions, o.requests, o.watchChanges, o.clockWarnings, o.duration}
	for i, c := range all {
		if err := reg.Register(c); err != nil {
			// All or nothing, so that New can be called again.
			for _, r := range all[:i] {
				reg.Unregister(r)
			}
			return nil, errors.Join(errors.New("leprom: registering the metrics"), err)
		}
	}
	return o, nil
}

// Observe implements leaderelection.Observer.
func (o *Observer) Observe(e leaderelection.Event) {
	el := e.Election
	switch e.Kind {
	case leaderelection.EventElected:
		o.lead(el, 1)
		o.transitions.WithLabelValues(el, "elected").Inc()
		o.tenure(el, e)
	case leaderelection.EventExtended:
		o.tenure(el, e)
	case leaderelection.EventOusted:
		o.lead(el, -1)
		o.transitions.WithLabelValues(el, string(e.Reason)).Inc()
		o.endTenure(el, e)
	case leaderelection.EventLeaderChanged:
		o.tenure(el, e)
	case leaderelection.EventStoreRequest:
		o.requests.WithLabelValues(el, string(e.Op), string(e.Result)).Inc()
		if e.Op != leaderelection.OpWait { // a wait lasts as long as nothing changes
			o.duration.WithLabelValues(el, string(e.Op)).Observe(e.Latency.Seconds())
		}
	case leaderelection.EventWatchChange:
		o.watchChanges.WithLabelValues(el, e.Change.String()).Inc()
		switch e.Change {
		case leaderelection.LeaderElected, leaderelection.TermExtended:
			o.tenure(el, e)
		default:
			o.endTenure(el, e)
		}
	case leaderelection.EventClockOffset:
		o.clockOffset.WithLabelValues(el, "low").Set(e.Offset.Low.Seconds())
		if e.Offset.HighKnown {
			o.clockOffset.WithLabelValues(el, "high").Set(e.Offset.High.Seconds())
		} else {
			o.clockOffset.DeleteLabelValues(el, "high")
		}
	case leaderelection.EventClockWarning:
		o.clockWarnings.WithLabelValues(el).Inc()
	case leaderelection.EventStarted:
		// A candidate that has not led yet has a series too, so that a
		// sum over an election's candidates sees them.
		o.lead(el, 0)
		o.follow(el, 1)
	case leaderelection.EventWatchStarted:
		o.follow(el, 1)
	case leaderelection.EventStopped:
		o.follow(el, -1)
	case leaderelection.EventWatchStopped:
		o.follow(el, -1)
	}
}

// lead counts the tenures of this process on el beginning (+1) or ending
// (-1), and sets is_leader: 1 while any runs. Two Acquires of one process
// on one election (or an Acquire restarted before the old one has
// returned) each report their own tenures.
func (o *Observer) lead(el string, delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := max(o.leading[el]+delta, 0)
	if n == 0 {
		delete(o.leading, el)
	} else {
		o.leading[el] = n
	}
	o.isLeader.WithLabelValues(el).Set(float64(min(n, 1)))
}

// follow counts an Acquire or a Watch on el starting (+1) or returning (-1).
// A process that no longer follows the election forgets what it saw there,
// which may be long out of date: its leader, its newest tenure and its clock
// offset.
func (o *Observer) follow(el string, delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := max(o.following[el]+delta, 0)
	o.following[el] = n
	if n == 0 {
		delete(o.following, el)
		delete(o.terms, el) // the next tenure seen is taken, whatever its Term
		o.setLeaderLocked(el, "")
		o.fencingToken.DeleteLabelValues(el)
		o.termExpiry.DeleteLabelValues(el)
		o.clockOffset.DeletePartialMatch(prometheus.Labels{"election": el})
	}
}

// tenure records the tenure e describes as the newest seen, with its
// leader, unless a newer one was.
func (o *Observer) tenure(el string, e leaderelection.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.newestLocked(el, e) {
		o.setLeaderLocked(el, e.LeaderID)
	}
}

// endTenure records the end of the tenure e describes (a release, an
// expiry, an ousting, a deletion): the election has no leader now, unless a
// newer tenure was seen.
func (o *Observer) endTenure(el string, e leaderelection.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.newestLocked(el, e) {
		o.setLeaderLocked(el, "")
	}
}

// newestLocked sets the gauges of el's newest tenure to the one e describes
// and reports true, unless a newer one was seen. Call with o.mu held.
func (o *Observer) newestLocked(el string, e leaderelection.Event) bool {
	if newest, ok := o.terms[el]; ok && e.Term < newest {
		return false
	}
	o.terms[el] = e.Term
	o.fencingToken.WithLabelValues(el).Set(float64(e.Term))
	o.termExpiry.WithLabelValues(el).Set(unixSeconds(e.Expiry))
	return true
}

func (o *Observer) setLeaderLocked(el, id string) {
	if prev, ok := o.leaders[el]; ok && prev != id {
		o.leaderInfo.DeleteLabelValues(el, prev)
	}
	if id == "" {
		delete(o.leaders, el)
		return
	}
	o.leaders[el] = id
	o.leaderInfo.WithLabelValues(el, id).Set(1)
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
