// Package leotel exports what leader elections do as OpenTelemetry metrics.
//
// New creates the instruments on a MeterProvider (the global one when nil),
// with a meter named after this package's import path, and returns a
// leaderelection.Observer: set it as the Observer of every Config and
// WatchConfig to export. Names are dotted, with units in the unit field:
//
//	leaderelection.is_leader               gauge {leader}        1 while this process leads
//	leaderelection.fencing_token           gauge {token}         Term of the newest tenure seen
//	leaderelection.term.expiry             gauge s               its TermExpiry, Unix seconds (*)
//	leaderelection.leader                  gauge {leader}        1 for the current leader (attribute leader_id)
//	leaderelection.transitions             counter {transition}  attribute reason
//	leaderelection.store.requests          counter {request}     attributes op, result
//	leaderelection.store.request.duration  histogram s           attribute op
//	leaderelection.watch.changes           counter {change}      attribute kind
//	leaderelection.clock.offset            gauge s               attribute bound (low, high)
//	leaderelection.clock.warnings          counter {warning}
//
// Every instrument has the attribute election (the store and record the
// election runs on). The gauges are observed at collection time from the
// last event, so that a leader id that is no longer current disappears.
// Events about a tenure older than the newest seen (a Watch behind a
// candidate in the same process) change no gauge.
//
// (*) As last reported: the leader and a Watch report each extension, a
// waiting candidate only the tenure's start.
//
// fencing_token, term.expiry, leader and clock.offset describe what this
// process sees while an Acquire or a Watch of it follows the election, and
// are no longer reported once the last one returns: what they showed may be
// long out of date. is_leader stays, at 0. is_leader is 1 while any tenure
// of this process runs, however many Acquire calls it makes on the election.
//
// Metrics only report; the safety of an election rests on the engine (see
// the leaderelection package).
package leotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/racedecider/leaderelection"
)

// ScopeName is the name of the meter New creates: this package's import
// path.
const ScopeName = "github.com/racedecider/leaderelection/leotel"

// Observer is a leaderelection.Observer that records OpenTelemetry metrics.
// It is safe for concurrent use by any number of elections.
type Observer struct {
	transitions, requests, watchChanges, clockWarnings metric.Int64Counter
	duration                                           metric.Float64Histogram
	reg                                                metric.Registration

	mu    sync.Mutex
	state map[string]*state // per election
}

// state is what the gauges report for one election.
type state struct {
	leading     int // tenures of this process running
	term        int64
	expiry      time.Time
	leader      string
	offset      leaderelection.ClockOffset
	offsetKnown bool
	// tenureKnown: term is the newest tenure seen since the election was
	// last followed; events about older ones are stale.
	tenureKnown  bool
	leadingKnown bool
	following    int // Acquire and Watch calls running
}

var _ leaderelection.Observer = (*Observer)(nil)

// New creates the instruments on mp (otel.GetMeterProvider() when nil) and
// returns the Observer that records them. Close unregisters its gauges'
// callback.
func New(mp metric.MeterProvider) (*Observer, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	o := &Observer{state: map[string]*state{}}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	o.transitions = counter("leaderelection.transitions", "{transition}", "Tenures of this process begun (reason elected) and ended, by reason.")
	o.requests = counter("leaderelection.store.requests", "{request}", "Requests to the store, by operation and result.")
	o.watchChanges = counter("leaderelection.watch.changes", "{change}", "Changes a watcher reported, by kind.")
	o.clockWarnings = counter("leaderelection.clock.warnings", "{warning}", "Times the clock offset bound went past MaxClockSkew/4.")
	var err error
	o.duration, err = m.Float64Histogram("leaderelection.store.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of requests to the store, by operation."),
		metric.WithExplicitBucketBoundaries(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
	errs = append(errs, err)

	isLeader, err := m.Int64ObservableGauge("leaderelection.is_leader", metric.WithUnit("{leader}"),
		metric.WithDescription("1 while this process leads the election (OnElected runs), else 0."))
	errs = append(errs, err)
	token, err := m.Int64ObservableGauge("leaderelection.fencing_token", metric.WithUnit("{token}"),
		metric.WithDescription("The fencing token (Term) of the newest tenure this process has seen."))
	errs = append(errs, err)
	expiry, err := m.Float64ObservableGauge("leaderelection.term.expiry", metric.WithUnit("s"),
		metric.WithDescription("When the newest tenure seen ends unless extended, as Unix seconds on its leader's clock."))
	errs = append(errs, err)
	leader, err := m.Int64ObservableGauge("leaderelection.leader", metric.WithUnit("{leader}"),
		metric.WithDescription("1 for the current leader's id (attribute leader_id)."))
	errs = append(errs, err)
	offset, err := m.Float64ObservableGauge("leaderelection.clock.offset", metric.WithUnit("s"),
		metric.WithDescription("Bounds (attribute bound: low, high) on the store's clock minus this host's, from recent commit times."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("leotel: creating the instruments"), err)
	}

	o.reg, err = m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		for el, s := range o.state {
			attrs := metric.WithAttributes(attribute.String("election", el))
			if s.leadingKnown {
				ob.ObserveInt64(isLeader, int64(min(s.leading, 1)), attrs)
			}
			if s.tenureKnown {
				ob.ObserveInt64(token, s.term, attrs)
				ob.ObserveFloat64(expiry, unixSeconds(s.expiry), attrs)
			}
			if s.leader != "" {
				ob.ObserveInt64(leader, 1, metric.WithAttributes(attribute.String("election", el), attribute.String("leader_id", s.leader)))
			}
			if s.offsetKnown {
				ob.ObserveFloat64(offset, s.offset.Low.Seconds(), metric.WithAttributes(attribute.String("election", el), attribute.String("bound", "low")))
				if s.offset.HighKnown {
					ob.ObserveFloat64(offset, s.offset.High.Seconds(), metric.WithAttributes(attribute.String("election", el), attribute.String("bound", "high")))
				}
			}
		}
		return nil
	}, isLeader, token, expiry, leader, offset)
	if err != nil {
		return nil, errors.Join(errors.New("leotel: registering the gauges' callback"), err)
	}
	return o, nil
}

// Close stops reporting the gauges.
func (o *Observer) Close() error { return o.reg.Unregister() }

// Observe implements leaderelection.Observer.
func (o *Observer) Observe(e leaderelection.Event) {
	ctx := context.Background()
	el := attribute.String("election", e.Election)
	switch e.Kind {
	case leaderelection.EventElected:
		o.transitions.Add(ctx, 1, metric.WithAttributes(el, attribute.String("reason", "elected")))
		o.update(e.Election, func(s *state) { s.lead(1); s.tenure(e) })
	case leaderelection.EventExtended, leaderelection.EventLeaderChanged:
		o.update(e.Election, func(s *state) { s.tenure(e) })
	case leaderelection.EventOusted:
		o.transitions.Add(ctx, 1, metric.WithAttributes(el, attribute.String("reason", string(e.Reason))))
		o.update(e.Election, func(s *state) { s.lead(-1); s.endTenure(e) })
	case leaderelection.EventStoreRequest:
		o.requests.Add(ctx, 1, metric.WithAttributes(el, attribute.String("op", string(e.Op)), attribute.String("result", string(e.Result))))
		if e.Op != leaderelection.OpWait { // a wait lasts as long as nothing changes
			o.duration.Record(ctx, e.Latency.Seconds(), metric.WithAttributes(el, attribute.String("op", string(e.Op))))
		}
	case leaderelection.EventWatchChange:
		o.watchChanges.Add(ctx, 1, metric.WithAttributes(el, attribute.String("kind", e.Change.String())))
		o.update(e.Election, func(s *state) {
			switch e.Change {
			case leaderelection.LeaderElected, leaderelection.TermExtended:
				s.tenure(e)
			default:
				s.endTenure(e)
			}
		})
	case leaderelection.EventClockOffset:
		o.update(e.Election, func(s *state) { s.offset, s.offsetKnown = e.Offset, true })
	case leaderelection.EventClockWarning:
		o.clockWarnings.Add(ctx, 1, metric.WithAttributes(el))
	case leaderelection.EventStarted:
		// A candidate that has not led yet reports 0 too, so that a sum
		// over an election's candidates sees them.
		o.update(e.Election, func(s *state) { s.lead(0); s.follow(1) })
	case leaderelection.EventWatchStarted:
		o.update(e.Election, func(s *state) { s.follow(1) })
	case leaderelection.EventStopped:
		o.update(e.Election, func(s *state) { s.follow(-1) })
	case leaderelection.EventWatchStopped:
		o.update(e.Election, func(s *state) { s.follow(-1) })
	}
}

// lead counts the tenures of this process beginning (+1) or ending (-1):
// is_leader is 1 while any runs. Two Acquires of one process on one
// election (or an Acquire restarted before the old one has returned) each
// report their own tenures.
func (s *state) lead(delta int) {
	s.leading, s.leadingKnown = max(s.leading+delta, 0), true
}

// follow counts an Acquire or a Watch starting (+1) or returning (-1). A
// process that no longer follows the election forgets what it saw there,
// which may be long out of date: its leader, its newest tenure and its clock
// offset.
func (s *state) follow(delta int) {
	s.following = max(s.following+delta, 0)
	if s.following == 0 {
		// The next tenure seen is taken, whatever its Term.
		s.leader, s.tenureKnown, s.offsetKnown = "", false, false
	}
}

func (o *Observer) update(el string, f func(*state)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.state[el]
	if s == nil {
		s = &state{}
		o.state[el] = s
	}
	f(s)
}

// tenure records the tenure e describes as the newest seen, with its
// leader, unless a newer one was: an event about an older one (a watcher
// behind a candidate in the same process) is stale.
func (s *state) tenure(e leaderelection.Event) {
	if s.newest(e) {
		s.leader = e.LeaderID
	}
}

// endTenure records the end of the tenure e describes (a release, an
// expiry, an ousting, a deletion): there is no leader now, unless a newer
// tenure was seen.
func (s *state) endTenure(e leaderelection.Event) {
	if s.newest(e) {
		s.leader = ""
	}
}

// newest takes the tenure e describes as the newest seen and reports true,
// unless a newer one was (since the election was last followed).
func (s *state) newest(e leaderelection.Event) bool {
	if s.tenureKnown && e.Term < s.term {
		return false
	}
	s.term, s.expiry, s.tenureKnown = e.Term, e.Expiry, true
	return true
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
