package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"time"
	"unicode/utf8"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
)

// Recommended settings, for a Config that has no reason to differ.
const (
	// DefaultTermLength suits most jobs: a crashed leader is replaced within
	// about 16 s, and the leader writes twice per term.
	DefaultTermLength = 15 * time.Second
	// DefaultMaxClockSkew is generous for hosts synchronised by NTP or a
	// cloud provider's time service, which keep within a few milliseconds.
	DefaultMaxClockSkew = time.Second
	// DefaultExpectedCandidates is the ExpectedCandidates a Config gets when
	// it sets none: a leader and two stand-bys.
	DefaultExpectedCandidates = 3
)

// Config describes one candidate. Fill it in, then call Acquire.
type Config struct {
	// Decider is the store the election runs on. Required.
	Decider RaceDecider

	// LeaderID identifies this candidate in the record. It must be unique
	// per process incarnation, not per host: a restarted process on the same
	// host needs a new one (append a random suffix to the host name).
	// Required, and valid UTF-8 (as HostPort's addresses must be): the
	// record is JSON.
	LeaderID string

	// HostPort lists where clients reach this candidate while it leads; the
	// legrpc resolver dials these. Optional.
	HostPort []string

	// ConnectionParams is published with HostPort: legrpc reads a gRPC
	// service config from it; others may store any small payload. Optional.
	ConnectionParams []byte

	// TermLength is how long an acquisition or extension lasts. A crashed
	// leader is replaced within TermLength + MaxClockSkew of its last
	// extension as its successor's clock reads it (up to TermLength +
	// 2 x MaxClockSkew of real time, if that clock is behind); a shorter
	// term means faster failover and more writes (the leader writes twice
	// per term). DefaultTermLength suits most jobs. It must be greater than
	// 2 x MaxClockSkew; 4 x or more is recommended, so that the leader
	// still has time to extend after the skew corrections. At most 24 hours.
	TermLength time.Duration

	// MaxClockSkew bounds how far apart any two candidates' clocks may be.
	// Candidates wait this long past a term's expiry before taking over, and
	// the leader extends this much earlier. Safety rests on it: set it above
	// the worst skew your hosts can have (DefaultMaxClockSkew is generous
	// for synchronised hosts). Zero trusts the clocks completely, which is
	// right only for candidates sharing one clock.
	MaxClockSkew time.Duration

	// PollInterval bounds how long a waiting candidate goes without reading
	// the record when the Decider cannot push changes (or its push channel
	// fails, or cannot vouch that nothing changed: one not listening yet),
	// and so how long a release can go unnoticed. Zero means TermLength / 4, or
	// ExpectedCandidates x TermLength / 64 if that is longer: with N
	// candidates polling, one finds a release after about PollInterval /
	// (N+1), and two find it within a store round trip of each other (and
	// both write) less often the longer the interval. Each candidate polls
	// on a schedule of its own, fixed on the clock: a period between 7/8 of
	// PollInterval and all of it, at a phase drawn at random, so that
	// candidates that read together (started together, woken at one
	// takeover time) do not go on polling in step. At most 24 hours.
	PollInterval time.Duration

	// ExpectedCandidates is about how many candidates campaign for this
	// election: a starting point, as each candidate learns it. Candidates
	// that find the record free together (woken by the same release, at
	// one takeover time, or started at once) each wait a random while
	// before writing, over a window that grows with their number and with
	// how long a write takes to reach the others (the store's round trip,
	// or the delay of its pushed changes), so that usually only one writes
	// and the others see its write in time. Each candidate starts from
	// ExpectedCandidates - 1 of them and learns their number from the herds
	// it meets (see the README's sizing section): candidates started
	// together learn it from the first one, others over a few hand-overs,
	// or over more than ten where pushes take a varying while: set it for
	// a crowd that must not spend writes learning its size.
	// On a store that cannot push changes, herds show their size only at
	// takeover times and start-ups, and the default PollInterval grows with
	// this value only: set it when running more than about 16 candidates
	// there. Zero means 3.
	ExpectedCandidates int

	// DisableRelease, when true, keeps the term held when Acquire's context
	// ends: the next leader waits for it to expire instead of taking over
	// at once. Leave it false unless the process must not write on the way
	// out.
	DisableRelease bool

	// Clock is the time source for every wait, deadline and expiry. Nil
	// means the real clock; tests pass a fake or offset clock.
	Clock clocks.Clock

	// OnElected runs while this candidate leads, and the tenure lasts no
	// longer than it runs: returning ends the tenure as a shutdown does
	// (the term is released), and the candidate campaigns again only after
	// a pause (see Acquire). To lead until leadership is lost or Acquire's
	// context ends, block on ctx.Done() before returning. This differs from
	// vimeo/leaderelection and client-go, where returning keeps the
	// leadership: here a leader whose work has stopped must not keep the
	// term and make a successor wait.
	//
	// Its context is cancelled when leadership ends; tv holds the current
	// expiry and the fencing token (tv.Term()). Check tv.ValueInFuture()
	// before every action that needs leadership: the context may be
	// observed late, tv never is. Acquire waits for OnElected to return
	// before anyone else can be told the leadership was released, so wait
	// here for the work OnElected started. Required.
	OnElected func(ctx context.Context, tv *TimeView)

	// OnOusting runs after OnElected has returned, each time this candidate
	// stops leading (lost, expired or released). Optional.
	OnOusting func(ctx context.Context)

	// LeaderChanged runs once for each change of leader this candidate
	// observes, itself included, with the new leader's record. It runs on
	// Acquire's goroutine: keep it short. Optional.
	LeaderChanged func(ctx context.Context, e entry.RaceEntry)

	// Logger receives reports of store errors and leadership changes. Nil
	// discards them.
	Logger *slog.Logger

	// Observer is told of tenures, store requests and the clock offset
	// (see Observer); leprom and leotel export them as metrics, and
	// HealthCheck judges them. Nil costs nothing. With an Observer (or
	// EnforceMaxClockSkew), each write whose store reports a commit time
	// bounds this host's clock offset to the store's, and a bound further
	// than MaxClockSkew/4 from zero is logged as a warning.
	Observer Observer

	// EnforceMaxClockSkew, when true, checks the assumption MaxClockSkew
	// stands for instead of only trusting it: while this host's clock is
	// known to be further than MaxClockSkew/2 from the store's (two such
	// hosts could be MaxClockSkew apart), the candidate does not campaign,
	// and a leader that learns it steps down (OustClockSkew). The evidence
	// comes from commit times the store reports; a store that reports none
	// gives none, and the setting then does nothing. Samples older than 8 x
	// TermLength are forgotten, so that a candidate kept out by them tries
	// again (and measures again) once they are. Ignored when MaxClockSkew
	// is zero.
	EnforceMaxClockSkew bool
}

// Validate reports every problem with c, naming the offending values.
func (c *Config) Validate() error {
	if c == nil {
		return errors.New("leaderelection: invalid Config: nil")
	}
	var errs []error
	errs = append(errs, nilErrors(c.Decider, c.Observer)...)
	if c.OnElected == nil {
		errs = append(errs, errors.New("nil OnElected"))
	}
	if c.LeaderID == "" {
		errs = append(errs, errors.New("empty LeaderID"))
	}
	// The record is JSON, which would keep invalid UTF-8 as U+FFFD: the
	// leader would not know its own record.
	if !utf8.ValidString(c.LeaderID) {
		errs = append(errs, fmt.Errorf("LeaderID %q is not valid UTF-8", c.LeaderID))
	}
	for _, hp := range c.HostPort {
		if !utf8.ValidString(hp) {
			errs = append(errs, fmt.Errorf("HostPort %q is not valid UTF-8", hp))
		}
	}
	if c.ExpectedCandidates < 0 || c.ExpectedCandidates > maxExpectedCandidates {
		errs = append(errs, fmt.Errorf("ExpectedCandidates (%d) must be between 0 and %d", c.ExpectedCandidates, maxExpectedCandidates))
	}
	errs = append(errs, validateTiming(c.TermLength, c.MaxClockSkew, c.PollInterval)...)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("leaderelection: invalid Config: %w", errors.Join(errs...))
}

// nilErrors reports a nil Decider, and a Decider or Observer that is a nil
// pointer or func in an interface: not nil to a comparison, yet its first
// call would panic on the engine's goroutine.
func nilErrors(d RaceDecider, o Observer) []error {
	var errs []error
	if d == nil {
		errs = append(errs, errors.New("nil Decider"))
	} else if isNil(d) {
		errs = append(errs, fmt.Errorf("the Decider is a nil %T", d))
	}
	if o != nil && isNil(o) {
		errs = append(errs, fmt.Errorf("the Observer is a nil %T", o))
	}
	return errs
}

// isNil reports whether v holds a nil pointer or func.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Func:
		return r.IsNil()
	}
	return false
}

func validateTiming(term, skew, poll time.Duration) []error {
	var errs []error
	if term <= 0 {
		errs = append(errs, fmt.Errorf("TermLength (%s) must be positive", term))
	}
	if skew < 0 {
		errs = append(errs, fmt.Errorf("MaxClockSkew (%s) must not be negative", skew))
	}
	if poll < 0 {
		errs = append(errs, fmt.Errorf("PollInterval (%s) must not be negative", poll))
	}
	if len(errs) > 0 {
		return errs
	}
	if term < minTermLength {
		errs = append(errs, fmt.Errorf("TermLength (%s) must be at least %s", term, minTermLength))
	}
	if term > maxInterval {
		errs = append(errs, fmt.Errorf("TermLength (%s) must be at most %s", term, maxInterval))
	}
	if poll > maxInterval {
		errs = append(errs, fmt.Errorf("PollInterval (%s) must be at most %s", poll, maxInterval))
	}
	// term - skew <= skew is term <= 2 x skew without the overflow.
	if term-skew <= skew {
		rec := "4 x MaxClockSkew"
		if skew <= math.MaxInt64/4 {
			rec = fmt.Sprintf("4 x (%s)", 4*skew)
		}
		errs = append(errs, fmt.Errorf("TermLength (%s) must be greater than 2 x MaxClockSkew (%s); %s or more is recommended",
			term, skew, rec))
	}
	if poll > 0 && poll < term/64 {
		errs = append(errs, fmt.Errorf("PollInterval (%s) must be at least TermLength/64 (%s): each waiting candidate would read the store almost continuously",
			poll, term/64))
	}
	return errs
}

// minTermLength is the shortest TermLength: below it the engine's backoffs
// and timeouts, shares of the term, would round to nothing.
const minTermLength = time.Millisecond

// maxInterval bounds TermLength and PollInterval: far longer than any
// election needs, and short enough that the schedules derived from them
// (poll grids of many intervals, defaults of many shares of the term) stay
// within a Duration.
const maxInterval = 24 * time.Hour

// maxExpectedCandidates bounds ExpectedCandidates, so that the PollInterval
// derived from it stays within reason (and within a Duration).
const maxExpectedCandidates = 10000

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// withDefaults returns a copy of c with its zero fields filled in.
func (c *Config) withDefaults() Config {
	d := *c
	if d.ExpectedCandidates == 0 {
		d.ExpectedCandidates = DefaultExpectedCandidates
	}
	d.PollInterval = orDefault(d.PollInterval, max(d.TermLength/4, time.Duration(d.ExpectedCandidates)*d.TermLength/64))
	if d.Clock == nil {
		d.Clock = clocks.DefaultClock()
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d
}
