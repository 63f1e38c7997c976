package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Options are the settings a seed does not decide: the negative controls,
// each a deliberate breakage that the checker must notice.
type Options struct {
	// ClockSpread scales the clock offsets. 0 or 1 keeps every pair of
	// clocks within MaxClockSkew, as the protocol assumes; 3 lets them
	// differ by up to 3 x MaxClockSkew (negative control).
	ClockSpread float64
	// ZeroSkewFollowers configures about half the candidates with
	// MaxClockSkew 0 while the clocks really differ: they skip the skew wait
	// (negative control: a broken engine, built from configuration alone).
	ZeroSkewFollowers bool
	// StaleWriteProb is the probability that the store accepts a write
	// conditioned on a stale token instead of refusing it (negative
	// control: a broken store).
	StaleWriteProb float64
	// Unfenced makes the downstream accept every action whatever its token
	// (negative control: shows that pauses between a TimeView check and the
	// action it guards do happen, and that only fencing catches them).
	Unfenced bool
	// LateTimers delays every timer the engine arms (AfterFunc) by a
	// quarter of a term (negative control: a broken clock hook; the
	// elected context then outlives the TimeView).
	LateTimers bool
	// NoSleep makes the engine's sleeps shorter than a term (backoffs,
	// jitter) a thousand times shorter (negative control: retries
	// without backoff).
	NoSleep bool
	// DoubleOusting, DoubleChanged record each OnOusting and LeaderChanged
	// call twice (negative controls: a broken engine hook).
	DoubleOusting, DoubleChanged bool
	// ResetFencing makes the store number a record created where none
	// exists from 1 (negative control: a backend that resets fencing on
	// deletion).
	ResetFencing bool
	// GuardNoDrain lets OnElected return before the Guard has drained its
	// admitted calls (negative control: a broken Guard).
	GuardNoDrain bool
	// WatchDrop drops every report, WatchReplay delivers the previous
	// report again after each one (negative controls: a broken Watch).
	WatchDrop, WatchReplay bool
	// ResolverLag gives resolvers a clock half a term behind their
	// host's; ResolverReplay makes them hand gRPC the previous leader's
	// addresses again after each new leader's; ResolverFreeze makes them
	// hand gRPC nothing once the faults end (negative controls: a broken
	// legrpc resolver).
	ResolverLag, ResolverReplay, ResolverFreeze bool
	// CommitOffset is added to every commit time the store reports
	// (negative control: a store whose clock readings are wrong).
	CommitOffset time.Duration
	// EnforceIgnored configures candidates without EnforceMaxClockSkew
	// where the scenario has it (negative control: a broken engine).
	EnforceIgnored bool
	// SharedPollGrid makes every candidate and watcher poll on one grid
	// (hooks.WithSharedPollGrid) instead of one drawn for each (negative
	// control: pollers whose clocks agree then read in step).
	SharedPollGrid bool
	// BackendRaceLost makes the cloud backends report an answer they
	// cannot read (an unknown outcome) as a lost race (negative control:
	// a backend's broken classification).
	BackendRaceLost bool
	// SampleEvery is the period of the checker's sampler, on top of the
	// exact checks after every store response. Zero means TermLength/50.
	SampleEvery time.Duration
}

// faultKind is one kind of scheduled fault.
type faultKind int

const (
	fPartition faultKind = iota // the slot's store access fails or hangs for Dur
	fPause                      // the slot's process is frozen for Dur
	fStall                      // the slot's next clock read returns a value Dur stale
	fCrash                      // the process freezes for good, without release
	fStop                       // graceful shutdown (an abandon when DisableRelease)
	fRestart                    // a new incarnation, with a new LeaderID, if the slot is down
	fDelete                     // the record is deleted (an operator, a lifecycle rule)
	fClockStep                  // the slot's wall clock steps to a new offset within the skew bound
	fRefuse                     // the slot's next store call is refused for good (ErrRefused)
	fSilent                     // the slot's (or a watcher's) push channel goes silent for Dur
)

var faultNames = [...]string{"partition", "pause", "stall-after-clock-read", "crash", "stop", "restart", "delete", "clock-step", "refuse", "push-silent"}

func (k faultKind) String() string { return faultNames[k] }

// anyLeader as a FaultEvent.Slot targets whichever slot holds the record
// when the event fires (a random live slot if none does).
const anyLeader = -1

// FaultEvent is one scheduled fault.
type FaultEvent struct {
	At   time.Duration // since the start of the run
	Kind faultKind
	Slot int
	Dur  time.Duration
	Hang bool // partitions: requests hang until their deadline rather than fail
	// RestartAfter, for crashes and stops: the slot gets a new incarnation
	// this long after. Negative: not before the faults end.
	RestartAfter time.Duration
}

func (e FaultEvent) String() string {
	target := fmt.Sprintf("slot %d", e.Slot)
	if e.Slot == anyLeader {
		target = "the leader's slot"
	}
	s := fmt.Sprintf("%s %s", e.Kind, target)
	switch e.Kind {
	case fPartition:
		mode := "fail"
		if e.Hang {
			mode = "hang"
		}
		s += fmt.Sprintf(" for %v (requests %s)", e.Dur, mode)
	case fPause, fStall, fSilent:
		s += fmt.Sprintf(" for %v", e.Dur)
	case fClockStep:
		s += fmt.Sprintf(" to offset %+v", e.Dur)
	case fCrash, fStop:
		if e.RestartAfter >= 0 {
			s += fmt.Sprintf(", restart after %v", e.RestartAfter)
		}
	}
	return s
}

// Scenario is everything a seed decides before the run starts.
type Scenario struct {
	Seed uint64
	N    int // candidate slots (hosts)
	Term time.Duration
	Skew time.Duration // MaxClockSkew configured
	Poll time.Duration // PollInterval configured (0: the default Term/4)
	// Notifier: the store pushes changes (implements ChangeNotifier).
	Notifier bool
	// Offsets and Drift are each slot's clock: it reads Offsets[i] ahead of
	// virtual time at the start, and gains Drift[i] (a rate, e.g. 1e-4) as
	// time passes. Restarts on a slot keep its clock.
	Offsets []time.Duration
	Drift   []float64
	// ZeroSkew marks slots whose candidates are configured with
	// MaxClockSkew 0 (negative control only).
	ZeroSkew []bool

	// FaultEnd is when every fault stops; the quiet phase follows.
	FaultEnd time.Duration
	// Store behaviour during the fault phase.
	MaxLatency      time.Duration // one leg (request or response) of a normal op
	PSlow           float64       // an op leg takes up to Term/2
	PFail           float64       // an op fails before reaching the store
	PLostResponse   float64       // the store did it, the caller gets an error (an ambiguous write)
	PLate           float64       // a write sits in a queue for Term/4 to 2 x Term
	PPushFail       float64       // a change notification fails
	PWorkerPause    float64       // per action: the worker pauses between its TimeView check and the action
	PStepDown       float64       // per action: OnElected returns on its own
	PDisableRelease float64       // an incarnation runs with DisableRelease (its stops are abandons)
	PStale          float64       // a read returns the record as it was up to StaleLag ago
	StaleLag        time.Duration //
	PAppliedLost    float64       // a write is applied but reported as a lost race
	PThrottle       float64       // an op is throttled (ErrThrottled, not applied)
	PInstant        float64       // an incarnation's OnElected returns at once (while faults last)
	PLongAction     float64       // per action: the worker's action runs Term/8 to Term, ignoring its context
	PReuseID        float64       // a restarted incarnation reuses its predecessor's LeaderID
	// SlowFrom..SlowTo: every store leg takes 0.2 to 0.25 x Term (a
	// persistently slow store; round trips near Term/2).
	SlowFrom, SlowTo time.Duration
	// ExpectedCandidates configured (0: the default).
	ExpectedCandidates int
	// Watchers run WatchConfig.Watch with WatchPoll; CleanWatcher[i]
	// marks those whose store access has no faults (their reports are
	// checked for coverage). Guard[i] marks slots whose candidates attach
	// a legrpc.Guard and serve calls.
	Watchers     int
	WatchPoll    time.Duration
	CleanWatcher []bool
	Guard        []bool
	// WatchOffsets are the watchers' clock offsets.
	WatchOffsets []time.Duration
	// FileBackend: the store keeps its record with the real file backend
	// (package file) in a temporary directory, under three names.
	FileBackend bool

	// Resolvers run legrpc's resolver (Builder.Build), built at
	// ResolverStart, on clocks ResolverOffsets; CleanResolver marks those
	// whose store access has no faults.
	Resolvers       int
	ResolverStart   []time.Duration
	ResolverOffsets []time.Duration
	CleanResolver   []bool

	// CommitPrecision is the precision of the commit times the store
	// reports (truncated); 0: it reports none. Observed: candidates have
	// a Config.Observer (which also makes them bound their clock offset);
	// Enforce: and EnforceMaxClockSkew. In a run with Enforce, FarSlot
	// (if not -1) is a slot whose clock is 0.55 to 0.65 x MaxClockSkew
	// from the store's, the others within 0.1 x, so that every pair stays
	// within MaxClockSkew while the far one is beyond MaxClockSkew/2.
	CommitPrecision time.Duration
	Observed        bool
	Enforce         bool
	FarSlot         int

	// Backend is, per slot, the backend its candidates reach the store
	// through: the sim's access itself (""), or the real gcs ("gcs",
	// "gcs-json": JSON reads) or s3 Decider over an in-process HTTP
	// transport (see cloud.go). Nil: all on the sim's access.
	Backend []string

	Events []FaultEvent
}

// Timing constants of the quiet phase.
const (
	quietLatency = 2 * time.Millisecond // one leg of an op once faults stop
	maxLateWrite = 2                    // a late write is applied at most this many terms after it was sent
)

// herdJitter bounds the engine's spreading window: at most (k-1) x term/32
// for k ExpectedCandidates (term/16 for the default 3), and term/2,
// whatever the store's round trip.
func (sc *Scenario) herdJitter() time.Duration {
	k := sc.expected() - 1
	if k <= 0 {
		return 0
	}
	return min(time.Duration(k)*sc.Term/32, sc.Term/2)
}

func (sc *Scenario) expected() int {
	if sc.ExpectedCandidates == 0 {
		return 3
	}
	return sc.ExpectedCandidates
}

// margin is what the liveness bounds allow for store latency and scheduling.
func (sc *Scenario) margin() time.Duration { return 40 * quietLatency }

// RecoveryBound is how long after the faults stop a leader must hold a valid
// TimeView: a cut-off leader's term can end up to Term after the faults
// stop, on its clock; a successor waits MaxClockSkew more on its own clock,
// which may be up to MaxClockSkew behind (so 2 x MaxClockSkew in virtual
// time), plus jitter (twice: before the first write of a campaign and after
// a wake-up) and a few store round trips. A candidate that notices a
// deletion holds off a whole term from its last read of no record within a
// term of the first (so up to two terms), and may notice it only after the
// faults stop: a poll interval and a read's backoff later.
func (sc *Scenario) RecoveryBound() time.Duration {
	b := sc.Term + 2*sc.Skew + 2*sc.herdJitter() + sc.margin()
	if slices.ContainsFunc(sc.Events, func(e FaultEvent) bool { return e.Kind == fDelete }) {
		b += sc.Term + sc.pollInterval() + sc.Term/4
	}
	return b
}

// HandoverBound is how long a graceful release may take to be taken over:
// waiting candidates learn of it by a push, or by their next poll.
func (sc *Scenario) HandoverBound() time.Duration {
	b := 2*sc.herdJitter() + sc.margin()
	if slices.Contains(sc.Guard, true) {
		// The Guard holds the release until admitted calls have
		// finished up, which they do within Term/32 of the stop.
		b += sc.Term / 32
	}
	if !sc.Notifier || slices.ContainsFunc(sc.Backend, func(b string) bool { return b != backendSim }) {
		// (The cloud backends cannot push: their candidates poll.)
		b += sc.pollInterval()
	}
	return b
}

func (sc *Scenario) pollInterval() time.Duration {
	if sc.Poll == 0 {
		return max(sc.Term/4, time.Duration(sc.expected())*sc.Term/64)
	}
	return sc.Poll
}

// horizon bounds the length of the run over which clocks must stay within
// the skew (the drift budget is spread over it).
func (sc *Scenario) horizon() time.Duration {
	return sc.FaultEnd + 2*sc.RecoveryBound() + 6*sc.Term
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// NewScenario derives a run's parameters and fault schedule from seed.
func NewScenario(seed uint64, o Options) *Scenario {
	r := rand.New(rand.NewPCG(seed, 0x5ce7a210))
	sc := &Scenario{Seed: seed}
	sc.N = pick(r, 1, 2, 2, 3, 3, 3, 4, 4, 5, 6)
	sc.Term = pick(r, 500*time.Millisecond, time.Second, 2*time.Second, 5*time.Second, 10*time.Second, 15*time.Second)
	// MaxClockSkew from 0 to 0.4 x Term (the engine requires < 0.5).
	sc.Skew = time.Duration(float64(sc.Term) * pick(r, 0, 0.02, 0.05, 0.1, 0.1, 0.2, 0.25, 0.4))
	if r.IntN(2) == 0 {
		sc.Poll = time.Duration(float64(sc.Term) * pick(r, 0.0625, 0.125, 0.5, 1))
	}
	sc.Notifier = r.IntN(2) == 0
	sc.ExpectedCandidates = pick(r, 0, 0, 1, 2, 3, 5, 10, 20, 50)

	// Clocks: offsets within +-Skew/2 (so any two within Skew), less a
	// quarter of the budget left for rate drift over the run.
	faultTerms := 8 + r.IntN(33)
	sc.FaultEnd = time.Duration(faultTerms) * sc.Term
	spread := o.ClockSpread
	if spread == 0 {
		spread = 1
	}
	driftBudget := float64(sc.Skew) / 8 / float64(sc.horizon()) // per clock, so a pair drifts apart by at most Skew/4
	for i := 0; i < sc.N; i++ {
		half := float64(sc.Skew) / 2 * spread
		off := time.Duration((r.Float64()*2 - 1) * half * 0.75)
		if r.IntN(4) == 0 { // at the edges now and then
			off = time.Duration(pick(r, -1.0, 1.0) * half * 0.75)
		}
		sc.Offsets = append(sc.Offsets, off)
		drift := 0.0
		if r.IntN(2) == 0 {
			drift = (r.Float64()*2 - 1) * driftBudget
		}
		sc.Drift = append(sc.Drift, drift)
		sc.ZeroSkew = append(sc.ZeroSkew, o.ZeroSkewFollowers && r.IntN(2) == 0)
	}

	// How harsh the fault phase is: a few runs have none at all.
	harsh := pick(r, 0.0, 0.2, 0.5, 0.5, 1.0, 1.0, 1.5)
	sc.MaxLatency = pick(r, time.Millisecond, 10*time.Millisecond, 50*time.Millisecond, sc.Term/20)
	sc.PSlow = 0.04 * harsh
	sc.PFail = 0.1 * harsh
	sc.PLostResponse = 0.08 * harsh
	sc.PLate = 0.05 * harsh
	sc.PPushFail = 0.1 * harsh
	sc.PWorkerPause = 0.03 * harsh
	sc.PStepDown = 0.003 * harsh
	sc.PDisableRelease = 0.25 * min(harsh, 1)
	sc.PStale = pick(r, 0, 0.05, 0.2) * min(harsh, 1)
	sc.StaleLag = uniform(r, sc.Term/8, sc.Term)
	sc.PAppliedLost = 0.03 * harsh
	sc.PThrottle = pick(r, 0, 0.05, 0.15) * min(harsh, 1)
	sc.PInstant = pick(r, 0, 0, 0.2) * min(harsh, 1)
	sc.PLongAction = 0.02 * harsh
	sc.PReuseID = pick(r, 0, 0.5)
	if harsh > 0 && r.IntN(4) == 0 {
		// A persistently slow store for several terms.
		sc.SlowFrom = uniform(r, 0, sc.FaultEnd/2)
		sc.SlowTo = min(sc.FaultEnd, sc.SlowFrom+time.Duration(4+r.IntN(8))*sc.Term)
	}
	sc.Watchers = pick(r, 0, 1, 1, 2)
	sc.WatchPoll = time.Duration(float64(sc.Term) * pick(r, 0.125, 0.25, 0.5, 1))
	for range sc.Watchers {
		sc.CleanWatcher = append(sc.CleanWatcher, r.IntN(2) == 0 || harsh == 0)
		sc.WatchOffsets = append(sc.WatchOffsets, time.Duration((r.Float64()*2-1)*float64(sc.Skew)/2*0.75*spread))
	}
	for range sc.N {
		sc.Guard = append(sc.Guard, r.IntN(2) == 0)
	}
	// The file backend has no push; the stale-store control rewrites the
	// memory store's record.
	sc.FileBackend = r.IntN(4) == 0 && o.StaleWriteProb == 0
	if sc.FileBackend {
		sc.Notifier = false
	}

	// Scheduled faults: on average `rate` per term over the whole run,
	// half of them aimed at whoever leads at the time.
	rate := 0.35 * harsh
	for t := time.Duration(0); ; {
		if rate == 0 {
			break
		}
		t += time.Duration(r.ExpFloat64() / rate * float64(sc.Term))
		if t >= sc.FaultEnd {
			break
		}
		ev := FaultEvent{At: t, Slot: r.IntN(sc.N), RestartAfter: -1}
		if r.IntN(2) == 0 {
			ev.Slot = anyLeader
		}
		switch x := r.IntN(118); {
		case x >= 100 && x < 104:
			ev.Kind = fDelete
		case x >= 104 && x < 110:
			ev.Kind = fClockStep
			ev.Slot = r.IntN(sc.N)
			ev.Dur = time.Duration((r.Float64()*2 - 1) * float64(sc.Skew) / 2 * 0.75 * spread)
		case x >= 110 && x < 112:
			ev.Kind = fRefuse
		case x >= 112:
			ev.Kind = fSilent
			ev.Slot = r.IntN(sc.N + sc.Watchers)
			ev.Dur = uniform(r, sc.Term/4, 3*sc.Term)
		case x < 25:
			ev.Kind = fPartition
			ev.Dur = uniform(r, sc.Term/4, 3*sc.Term)
			ev.Hang = r.IntN(2) == 0
		case x < 45:
			ev.Kind = fPause
			ev.Dur = uniform(r, sc.Term/10, 2*sc.Term)
		case x < 60:
			ev.Kind = fStall
			ev.Dur = uniform(r, sc.Term/10, 3*sc.Term/2)
		case x < 72:
			ev.Kind = fCrash
			ev.RestartAfter = uniform(r, 0, 3*sc.Term)
		case x < 92:
			ev.Kind = fStop
			ev.RestartAfter = uniform(r, 0, 2*sc.Term)
		default:
			ev.Kind = fRestart
		}
		sc.Events = append(sc.Events, ev)
	}
	sc.drawMore(seed, harsh, spread, o)
	sc.drawBackends(seed, o)
	return sc
}

// drawMore draws what later versions of the simulation added, from a
// stream of its own, so that the draws above (and so the course of a run
// without the additions) stay what they were for every seed.
func (sc *Scenario) drawMore(seed uint64, harsh, spread float64, o Options) {
	r := rand.New(rand.NewPCG(seed, 0x5ce7a211))
	sc.Resolvers = pick(r, 0, 0, 1, 1, 2)
	for range sc.Resolvers {
		sc.ResolverStart = append(sc.ResolverStart, uniform(r, 0, sc.FaultEnd/2))
		sc.ResolverOffsets = append(sc.ResolverOffsets, time.Duration((r.Float64()*2-1)*float64(sc.Skew)/2*0.75*spread))
		sc.CleanResolver = append(sc.CleanResolver, r.IntN(2) == 0 || harsh == 0)
	}

	// Checked clocks.
	sc.FarSlot = -1
	sc.CommitPrecision = pick(r, 0, time.Nanosecond, time.Microsecond, time.Millisecond, time.Millisecond, time.Second)
	sc.Observed = r.IntN(2) == 0
	sc.Enforce = sc.Observed && sc.CommitPrecision > 0 && sc.Skew > 0 && r.IntN(4) != 0 &&
		spread == 1 && !o.ZeroSkewFollowers
	if !sc.Enforce {
		return
	}
	if sc.N >= 2 && r.IntN(8) != 0 {
		sc.FarSlot = r.IntN(sc.N)
	}
	skew := float64(sc.Skew)
	farOffset := func() time.Duration {
		return time.Duration(pick(r, -1.0, 1.0) * (0.55 + 0.1*r.Float64()) * skew)
	}
	for i := range sc.N {
		// Within 0.1 x MaxClockSkew (0.375 x before), half the drift.
		sc.Offsets[i] = sc.Offsets[i] * 4 / 15
		sc.Drift[i] /= 2
		if i == sc.FarSlot {
			sc.Offsets[i] = farOffset()
		}
	}
	for i, ev := range sc.Events {
		if ev.Kind != fClockStep {
			continue
		}
		if ev.Slot == sc.FarSlot {
			d := farOffset()
			if (d < 0) != (sc.Offsets[ev.Slot] < 0) {
				d = -d
			}
			sc.Events[i].Dur = d
		} else {
			sc.Events[i].Dur = ev.Dur * 4 / 15
		}
	}
}

// drawBackends draws which slots reach the store through the real cloud
// backends: about one run in three (never a file run: GCS generations
// must be numbers), each slot one of the four (the controls that break
// the backends have one on every slot).
func (sc *Scenario) drawBackends(seed uint64, o Options) {
	r := rand.New(rand.NewPCG(seed, 0x5ce7a212))
	if sc.FileBackend || (r.IntN(3) != 0 && !o.BackendRaceLost) {
		return
	}
	for range sc.N {
		kinds := []string{backendSim, backendGCSXML, backendGCSJSON, backendS3}
		if o.BackendRaceLost {
			kinds = kinds[1:]
		}
		sc.Backend = append(sc.Backend, pick(r, kinds...))
	}
}

func (sc *Scenario) backend(slot int) string {
	if sc.Backend == nil {
		return backendSim
	}
	return sc.Backend[slot]
}

// String describes the scenario for a failure report.
func (sc *Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d candidate slots, TermLength %v, MaxClockSkew %v, PollInterval %v, push notifications %v\n",
		sc.Seed, sc.N, sc.Term, sc.Skew, sc.pollInterval(), sc.Notifier)
	for i := range sc.N {
		zs := ""
		if sc.ZeroSkew[i] {
			zs = " (configured with MaxClockSkew 0)"
		}
		fmt.Fprintf(&b, "  slot %d clock: offset %+v, drift %+.1f ppm%s\n", i, sc.Offsets[i], sc.Drift[i]*1e6, zs)
	}
	fmt.Fprintf(&b, "  faults until %v: latency up to %v/leg, slow %.3f, fail %.3f, lost response %.3f, late write %.3f, push fail %.3f, worker pause %.3f, step-down %.4f, DisableRelease %.2f\n",
		sc.FaultEnd, sc.MaxLatency, sc.PSlow, sc.PFail, sc.PLostResponse, sc.PLate, sc.PPushFail, sc.PWorkerPause, sc.PStepDown, sc.PDisableRelease)
	fmt.Fprintf(&b, "  stale read %.3f (lag up to %v), applied-but-lost %.3f, throttle %.3f, instant OnElected %.2f, long action %.3f, reused LeaderID %.1f, slow store %v..%v, ExpectedCandidates %d\n",
		sc.PStale, sc.StaleLag, sc.PAppliedLost, sc.PThrottle, sc.PInstant, sc.PLongAction, sc.PReuseID, sc.SlowFrom, sc.SlowTo, sc.ExpectedCandidates)
	if sc.FileBackend {
		fmt.Fprintf(&b, "  store: the file backend, one record under three names\n")
	}
	fmt.Fprintf(&b, "  %d watchers (poll %v, clean %v), guards on slots %v\n", sc.Watchers, sc.WatchPoll, sc.CleanWatcher, sc.Guard)
	b.WriteString(sc.clockString())
	if sc.Backend != nil {
		fmt.Fprintf(&b, "  backends per slot: %q\n", sc.Backend)
	}
	if sc.Resolvers > 0 {
		fmt.Fprintf(&b, "  %d legrpc resolvers (poll %v, built at %v, clean %v)\n", sc.Resolvers, sc.WatchPoll, sc.ResolverStart, sc.CleanResolver)
	}
	fmt.Fprintf(&b, "  liveness bounds: recovery %v after faults stop, graceful handover %v\n", sc.RecoveryBound(), sc.HandoverBound())
	fmt.Fprintf(&b, "  %d scheduled faults:\n", len(sc.Events))
	for _, e := range sc.Events {
		fmt.Fprintf(&b, "    %s  %s\n", fmtDur(e.At), e)
	}
	return b.String()
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%+10.4fs", d.Seconds()) }
