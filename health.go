package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	clocks "github.com/vimeo/go-clocks"
)

// HealthCheck judges, from the events it observes, whether the elections it
// follows are wedged. Set it as (or among, see Observers) the Observer of
// every Config and WatchConfig it should judge, and serve it as a liveness
// probe: it is an http.Handler answering 200 when healthy and 503 with the
// reason when not.
//
// An election is unhealthy when:
//   - a candidate of this process believes it leads (its OnElected has not
//     returned) but its term ran out more than Tolerance ago: OnElected
//     ignores its context, or the process is starved (whatever other
//     Acquires on the election do meanwhile);
//   - MaxQuiet is set, an Acquire or a Watch on the election runs, the
//     election is not led here, and no request to the store has been
//     answered (successfully, or with a lost race) for longer than MaxQuiet:
//     the store is unreachable or the campaign is stuck. A candidate's
//     pause after OnElected returned early (EventPaused) is not quiet,
//     unless another Acquire or a Watch on the election runs meanwhile;
//   - an Acquire or a Watch returned with an error other than its
//     context's (a store that refuses for good), and has not been called
//     anew since: until an Acquire on the election starts, for an
//     Acquire's error; a Watch, for a Watch's.
//
// It judges by Event.Election, the Decider's name: a Config and a WatchConfig
// on one Decider in one process are one election to it (the watcher's
// answered reads keep MaxQuiet satisfied for both, and MaxQuiet is judged
// until both have returned); give each its own HealthCheck to judge them
// apart.
//
// Use it for liveness, not readiness: a follower is healthy, and a readiness
// probe that failed on followers would take them out of service. The zero
// value is ready to use.
type HealthCheck struct {
	// Tolerance is how long past its term's expiry a process that still
	// believes it leads is given before it counts as wedged. Zero means
	// DefaultHealthTolerance.
	Tolerance time.Duration
	// MaxQuiet, when positive, is how long an election that is not led
	// here may go without an answered store request. A waiting candidate
	// reads at least every PollInterval and a watcher every
	// WatchConfig.PollInterval (8 x that with push); on a store that
	// pushes changes, a wait that a change or its deadline ends is an
	// answer too: a waiting candidate is woken by each extension, every
	// TermLength/2, and reads nothing, but after a crashed leader's last
	// extension it waits, unwoken, for that term to end: TermLength +
	// MaxClockSkew and a herd draw. Set it to at least twice that, and to
	// several PollIntervals. Zero disables the check.
	MaxQuiet time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clocks.Clock

	mu        sync.Mutex
	elections map[string]*health
}

// DefaultHealthTolerance is HealthCheck.Tolerance's default.
const DefaultHealthTolerance = 10 * time.Second

// health is what a HealthCheck knows of one election.
type health struct {
	// leads: the tenure each candidate here believes it leads (OnElected
	// has not returned), by LeaderID.
	leads map[string]lead
	// since: when judging began, or the last answered request.
	since time.Time
	// pauses: when each running candidate's pause after OnElected
	// returned early ends, by LeaderID. A pause makes no request: the
	// election is excused from MaxQuiet while every Acquire on it is in
	// one and no Watch runs (see pausedUntil).
	pauses map[string]time.Time
	// campaigns and watches: the Acquire and Watch calls running.
	campaigns, watches int
	// acquireErr and watchErr: the last error other than its context's
	// that an Acquire and a Watch returned, until one is called anew.
	acquireErr, watchErr error
}

type lead struct {
	term   int64
	expiry time.Time
}

var _ Observer = (*HealthCheck)(nil)
var _ http.Handler = (*HealthCheck)(nil)

func (h *HealthCheck) clock() clocks.Clock {
	if h.Clock == nil {
		return clocks.DefaultClock()
	}
	return h.Clock
}

// Observe implements Observer.
func (h *HealthCheck) Observe(e Event) {
	now := h.clock().Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.elections == nil {
		h.elections = map[string]*health{}
	}
	s := h.elections[e.Election]
	if s == nil {
		s = &health{}
		h.elections[e.Election] = s
	}
	switch e.Kind {
	case EventStarted, EventWatchStarted:
		switch {
		case s.campaigns+s.watches == 0:
			s.since, s.pauses = now, nil // judged afresh
		case s.watches == 0:
			// No longer excused by a pause (see Check), if every
			// candidate was in one: quiet counts from now, or from the
			// pause's end if it is over.
			s.since = maxTime(s.since, minTime(now, s.pausedUntil()))
		}
		if e.Kind == EventStarted {
			delete(s.pauses, e.LeaderID)
			s.campaigns++
			s.acquireErr = nil
		} else {
			s.watches++
			s.watchErr = nil
		}
	case EventStopped:
		s.campaigns = max(s.campaigns-1, 0)
		if err := failure(e.Err); err != nil {
			s.acquireErr = err
		}
		delete(s.leads, e.LeaderID)
		delete(s.pauses, e.LeaderID) // a pause ends with its Acquire
	case EventWatchStopped:
		s.watches = max(s.watches-1, 0)
		if err := failure(e.Err); err != nil {
			s.watchErr = err
		}
	case EventElected, EventExtended:
		if s.leads == nil {
			s.leads = map[string]lead{}
		}
		s.leads[e.LeaderID] = lead{e.Term, e.Expiry}
	case EventOusted:
		delete(s.leads, e.LeaderID)
	case EventPaused:
		if s.pauses == nil {
			s.pauses = map[string]time.Time{}
		}
		s.pauses[e.LeaderID] = e.Expiry
	case EventStoreRequest:
		if e.Result == ResultOK || e.Result == ResultRaceLost {
			s.since = maxTime(s.since, now)
		}
	}
}

// pausedUntil is when the first of the running candidates' pauses ends,
// while every one of them has paused; zero otherwise.
func (s *health) pausedUntil() time.Time {
	if s.campaigns == 0 || len(s.pauses) < s.campaigns {
		return time.Time{}
	}
	var first time.Time
	for _, end := range s.pauses {
		if first.IsZero() || end.Before(first) {
			first = end
		}
	}
	return first
}

// wedged returns the tenure with the earliest expiry among those still
// believed led more than tolerance past their expiry, if any.
func (s *health) wedged(now time.Time, tolerance time.Duration) *lead {
	var w *lead
	for _, l := range s.leads {
		if now.Sub(l.expiry) > tolerance && (w == nil || l.expiry.Before(w.expiry)) {
			w = &l
		}
	}
	return w
}

// failure is err, unless it is nil or a context's error.
func failure(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// Check returns nil when every election observed is healthy, else an error
// naming each unhealthy one and why.
func (h *HealthCheck) Check() error {
	now := h.clock().Now()
	tolerance := orDefault(h.Tolerance, DefaultHealthTolerance)
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, 0, len(h.elections))
	for name := range h.elections {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		s := h.elections[name]
		// No request until a pause ends: quiet counts from then.
		from, pause := s.since, ""
		if p := s.pausedUntil(); s.watches == 0 && p.After(from) {
			from, pause = p, " since its candidates' pause ended"
		}
		quiet := now.Sub(from)
		wedged := s.wedged(now, tolerance)
		switch {
		case s.acquireErr != nil:
			errs = append(errs, fmt.Errorf("election %s: Acquire ended: %w", name, s.acquireErr))
		case s.watchErr != nil:
			errs = append(errs, fmt.Errorf("election %s: Watch ended: %w", name, s.watchErr))
		case wedged != nil:
			errs = append(errs, fmt.Errorf("election %s: still leading term %d, which expired at %s, %s ago (tolerance %s)",
				name, wedged.term, wedged.expiry.Format(time.RFC3339Nano), now.Sub(wedged.expiry).Round(time.Millisecond), tolerance))
		case s.campaigns+s.watches > 0 && len(s.leads) == 0 && h.MaxQuiet > 0 && quiet > h.MaxQuiet:
			// (A leader writes only at its extensions, and one that
			// cannot is judged by its expiry, above.)
			errs = append(errs, fmt.Errorf("election %s: no answer from the store for %s%s (MaxQuiet %s)",
				name, quiet.Round(time.Millisecond), pause, h.MaxQuiet))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("leaderelection: unhealthy: %w", errors.Join(errs...))
}

// ServeHTTP answers 200 "ok" when Check passes, else 503 with Check's error.
func (h *HealthCheck) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := h.Check(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}
