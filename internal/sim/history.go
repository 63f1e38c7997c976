package sim

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/racedecider/leaderelection/entry"
)

// Event is one line of a run's history.
type Event struct {
	At   time.Duration // virtual time since the start of the run
	Who  string        // an incarnation ("c2.1": slot 2, first incarnation), "store", "sim", "check"
	What string
}

func (e Event) String() string { return fmt.Sprintf("%s  %-6s %s", fmtDur(e.At), e.Who, e.What) }

// Violation is a broken invariant.
type Violation struct {
	At    time.Duration
	Kind  string
	Msg   string
	Index int // of its event in the history
}

func (v Violation) String() string { return fmt.Sprintf("%s  %s: %s", fmtDur(v.At), v.Kind, v.Msg) }

// Stats are the figures of one run, or of a sweep once added up.
type Stats struct {
	Runs        int
	Virtual     time.Duration // simulated time
	Elections   int           // new terms that reached OnElected
	Tenures     int           // OnElected calls (a term re-entered after a late write counts again)
	Extensions  int           // TimeView moves forward seen by the checker
	Checks      int           // instants at which every TimeView was compared
	Actions     int           // downstream actions attempted
	Stale       int           // actions whose TimeView had expired when they reached the downstream
	Fenced      int           // actions the downstream rejected for a stale token
	Reads       int
	Writes      int
	Pushes      int
	Faults      map[string]int
	Violations  map[string]int
	MaxRecovery time.Duration // after the faults stopped, until a live leader held a valid TimeView
	// RecoveryExcess is the worst recovery beyond TermLength +
	// MaxClockSkew, as a fraction of MaxClockSkew (runs with skew only),
	// and ExcessSeed the seed that had it.
	RecoveryExcess  float64
	ExcessSeed      uint64
	MaxHandover     time.Duration // from a graceful stop in the quiet phase to the next election
	MaxHandoverPush time.Duration // the same, when the store pushes changes
	// DeletionOverlaps counts checks that found two valid TimeViews that
	// deletion allows (a candidate that never saw the deleted record).
	DeletionOverlaps int
	// FalseDeletions counts deletions a watcher reported after as many
	// stale reads of no record in a row as Watch takes to confirm one.
	FalseDeletions    int
	WatchCovered      int // tenures and deletions a clean watcher was required to report, and did
	ResolverConverged int // quiet-phase checks that found a resolver routing to the leader
	// OffsetSamples counts the clock offset bounds checked; SkewDetected
	// the candidates whose bound showed their clock further than
	// MaxClockSkew/2 from the store's (with EnforceMaxClockSkew), and
	// FarDetected those of them on a slot whose clock really is; FarProcs
	// counts the candidates on such slots.
	OffsetSamples, SkewDetected, FarDetected, FarProcs int
	// CloudCalls counts the calls to the real gcs and s3 backends checked.
	CloudCalls    int
	Refusals      int           // Acquire calls ended by a refusal
	MaxRefusalEnd time.Duration // the longest from a refusal to Acquire's return
	MaxOpsShare   float64       // the most store calls in one term by one participant, as a share of its budget
}

// Add adds o's figures to st.
func (st *Stats) Add(o Stats) {
	st.Runs += o.Runs
	st.Virtual += o.Virtual
	st.Elections += o.Elections
	st.Tenures += o.Tenures
	st.Extensions += o.Extensions
	st.Checks += o.Checks
	st.Actions += o.Actions
	st.Stale += o.Stale
	st.Fenced += o.Fenced
	st.Reads += o.Reads
	st.Writes += o.Writes
	st.Pushes += o.Pushes
	st.MaxRecovery = max(st.MaxRecovery, o.MaxRecovery)
	st.MaxHandover = max(st.MaxHandover, o.MaxHandover)
	st.MaxHandoverPush = max(st.MaxHandoverPush, o.MaxHandoverPush)
	if o.ExcessSeed != 0 && (st.ExcessSeed == 0 || o.RecoveryExcess > st.RecoveryExcess) {
		st.RecoveryExcess, st.ExcessSeed = o.RecoveryExcess, o.ExcessSeed
	}
	for k, v := range o.Faults {
		if st.Faults == nil {
			st.Faults = map[string]int{}
		}
		st.Faults[k] += v
	}
	st.DeletionOverlaps += o.DeletionOverlaps
	st.FalseDeletions += o.FalseDeletions
	st.WatchCovered += o.WatchCovered
	st.ResolverConverged += o.ResolverConverged
	st.OffsetSamples += o.OffsetSamples
	st.SkewDetected += o.SkewDetected
	st.FarDetected += o.FarDetected
	st.FarProcs += o.FarProcs
	st.CloudCalls += o.CloudCalls
	st.Refusals += o.Refusals
	st.MaxRefusalEnd = max(st.MaxRefusalEnd, o.MaxRefusalEnd)
	st.MaxOpsShare = max(st.MaxOpsShare, o.MaxOpsShare)
	for k, v := range o.Violations {
		if st.Violations == nil {
			st.Violations = map[string]int{}
		}
		st.Violations[k] += v
	}
}

// String prints the figures, one per line.
func (st *Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seeds run:            %d\n", st.Runs)
	fmt.Fprintf(&b, "virtual time:         %v\n", st.Virtual.Round(time.Second))
	fmt.Fprintf(&b, "elections simulated:  %d (OnElected calls %d)\n", st.Elections, st.Tenures)
	fmt.Fprintf(&b, "extensions seen:      %d\n", st.Extensions)
	fmt.Fprintf(&b, "exact checks:         %d\n", st.Checks)
	fmt.Fprintf(&b, "store ops:            %d reads, %d writes, %d change waits\n", st.Reads, st.Writes, st.Pushes)
	fmt.Fprintf(&b, "downstream actions:   %d (%d after their TimeView expired, %d of those rejected by fencing)\n", st.Actions, st.Stale, st.Fenced)
	fmt.Fprintf(&b, "worst recovery:       %v after faults stopped\n", st.MaxRecovery)
	fmt.Fprintf(&b, "  beyond TermLength + MaxClockSkew: at worst %.2f x MaxClockSkew (seed %d)\n", st.RecoveryExcess, st.ExcessSeed)
	fmt.Fprintf(&b, "watchers:             %d tenures and deletions required to be reported, all were\n", st.WatchCovered)
	fmt.Fprintf(&b, "resolvers:            %d quiet-phase checks found one routing to the leader\n", st.ResolverConverged)
	fmt.Fprintf(&b, "checked clocks:       %d offset bounds checked; %d candidates on a clock beyond MaxClockSkew/2, %d of them saw it (%d candidates in all)\n",
		st.OffsetSamples, st.FarProcs, st.FarDetected, st.SkewDetected)
	fmt.Fprintf(&b, "cloud backends:       %d calls to the real gcs and s3 Deciders checked\n", st.CloudCalls)
	fmt.Fprintf(&b, "refusals:             %d Acquire calls ended by one, at worst %v after it\n", st.Refusals, st.MaxRefusalEnd)
	fmt.Fprintf(&b, "busiest term:         %.0f%% of a participant's store-call budget\n", 100*st.MaxOpsShare)
	fmt.Fprintf(&b, "deletion overlaps:    %d checks (a candidate that never saw a deleted record)\n", st.DeletionOverlaps)
	fmt.Fprintf(&b, "false deletions:      %d (all of Watch's confirming reads stale)\n", st.FalseDeletions)
	fmt.Fprintf(&b, "worst handover:       %v after a graceful stop (%v with push notifications)\n", st.MaxHandover, st.MaxHandoverPush)
	total := 0
	for _, v := range st.Faults {
		total += v
	}
	fmt.Fprintf(&b, "faults injected:      %d\n", total)
	for _, k := range sortedKeys(st.Faults) {
		fmt.Fprintf(&b, "  %-24s %d\n", k, st.Faults[k])
	}
	total = 0
	for _, v := range st.Violations {
		total += v
	}
	fmt.Fprintf(&b, "violations found:     %d\n", total)
	for _, k := range sortedKeys(st.Violations) {
		fmt.Fprintf(&b, "  %-24s %d\n", k, st.Violations[k])
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Result is the outcome of one run.
type Result struct {
	Scenario   *Scenario
	Violations []Violation
	Stats      Stats
	History    []Event
	// Digest hashes the history, to tell whether two runs of a seed took
	// the same course.
	Digest uint64
}

// Failed reports whether the run broke an invariant.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// Has reports whether the run broke an invariant of the given kind.
func (r *Result) Has(kind string) bool {
	for _, v := range r.Violations {
		if v.Kind == kind {
			return true
		}
	}
	return false
}

// Report is a readable account of a failed run: the scenario, the
// violations, and the history around the first one.
func (r *Result) Report(before, after int) string {
	var b strings.Builder
	b.WriteString(r.Scenario.String())
	fmt.Fprintf(&b, "%d violations:\n", len(r.Violations))
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(r.Violations)-20)
			break
		}
		fmt.Fprintf(&b, "  %s\n", v)
	}
	from, to := 0, len(r.History)
	if len(r.Violations) > 0 {
		i := r.Violations[0].Index
		from, to = max(0, i-before), min(len(r.History), i+after+1)
	}
	fmt.Fprintf(&b, "history (events %d to %d of %d; times are virtual seconds since the start; clock readings are local):\n", from, to, len(r.History))
	for _, e := range r.History[from:to] {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// digest hashes a history as the set of events at each virtual instant:
// goroutines that run at the same instant record their events in no fixed
// order, and that order is not part of the course a run takes.
func digest(h []Event) uint64 {
	f := fnv.New64a()
	var same []string
	flush := func() {
		slices.Sort(same)
		for _, line := range same {
			f.Write([]byte(line))
		}
		same = same[:0]
	}
	for i, e := range h {
		if i > 0 && e.At != h[i-1].At {
			flush()
		}
		same = append(same, fmt.Sprintf("%d %s %s\n", e.At, e.Who, e.What))
	}
	flush()
	return f.Sum64()
}

// fmtLocal prints a clock reading as seconds since the start of the run.
func (s *sim) fmtLocal(t time.Time) string {
	return fmt.Sprintf("%.4fs", t.Sub(s.start).Seconds())
}

// fmtRecord prints a record briefly; write ids are left out (they are random
// and would make every history differ).
func (s *sim) fmtRecord(e *entry.RaceEntry) string {
	if e.ElectionNumber == entry.NoElections {
		return "[no record]"
	}
	kind := "extend"
	switch {
	case e.Released:
		kind = "release"
	case e.Term == e.ElectionNumber:
		kind = "acquire"
	}
	return fmt.Sprintf("[#%d %s term %d by %s expiry %s]", e.ElectionNumber, kind, e.Term, e.LeaderID, s.fmtLocal(e.TermExpiry))
}
