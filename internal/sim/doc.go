// Package sim is the safety simulation of the election engine: it runs the
// real Config.Acquire for several candidates, WatchConfig.Watch observers
// and legrpc Guards, against a simulated store (or the real file backend),
// in virtual time, under faults drawn from a seed, and checks every run's
// history for the protocol's promises.
//
// # A run
//
// Each seed runs in its own testing/synctest bubble (so virtual time is free
// and goroutines left behind fail the run). NewScenario derives from the seed
// the number of candidate slots (hosts, 1 to 6), TermLength, MaxClockSkew,
// PollInterval, whether the store pushes changes (ChangeNotifier), each
// host's clock, the store's fault rates and a schedule of faults. The run
// has a fault phase of 8 to 40 terms, then a quiet phase in which every
// fault stops and the liveness checks run, then a shutdown.
//
// Clocks: each host's clock is skewclock.New(clocks.DefaultClock(), offset)
// with the offset within +-3/8 MaxClockSkew, times a constant rate error
// (drift) small enough that two clocks stay within MaxClockSkew for the whole
// run. Absolute times are converted, and durations scaled, so that waits end
// when the clock's own Now says they should.
//
// Store: a memory.Decider behind a per-incarnation access. An operation is a
// request leg, the store acting atomically, and a response leg, each with
// random latency. Faults: a request that fails before it is sent; a lost
// response (for a write: applied, but the caller gets an error, an ambiguous
// write); a slow leg (up to Term/2); a write that sits in a queue for Term/4
// to 2 x Term and is applied when it arrives, whether or not the caller gave
// up; a failed change notification; a partition of one host (its requests
// fail at once, or hang until their deadline, and pushes to it are lost).
// Each incarnation draws the fate of its store calls from its own random
// stream, so that its k-th call meets the same fault whatever the others do.
//
// More store faults: the record deleted by an operator (and re-created by
// the candidates; only once it has existed for 2 x MaxClockSkew + Term/4,
// the engine's documented condition for numbering above it, and while no
// create sent earlier is still on its way); stale reads
// (a read served the record as it was up to StaleLag ago, as on some
// S3-compatible stores and NFS); a write applied but reported as a lost
// race; throttling (entry.ErrThrottled, not applied); a definite refusal
// (entry.ErrRefused: from then on the incarnation's every call is refused,
// and its Acquire must end, within a term of OnElected returning, or of the
// pause that spaces out tenures, with at most 3 calls after the first
// refusal); a persistently slow store (every leg 0.2 to 0.25 x Term for 4
// to 12 terms); a push channel that goes silent (no push, no error). A
// quarter of the runs keep the record with the real file backend
// (package file) in a temporary directory (/dev/shm when it exists) under
// three names (the file, a symlink beside it, and the path through a
// symlink to its directory), each incarnation writing through one of them;
// its flock is taken without blocking and retried on a timer, so it runs in
// the bubble (contention is rare: the lock is held only across syscalls).
//
// Cloud backends: in about a third of the runs on the simulated store,
// each slot's candidates reach it through the sim's access itself, or
// through the real gcs Decider (XML or JSON reads) or s3 Decider, whose
// HTTP client has an in-process RoundTripper (synctest cannot see
// sockets) that serves the store through the candidate's access and maps
// the sim's faults to each cloud's answers: GCS's JSON API (object
// download with X-Goog-Generation, multipart upload with
// ifGenerationMatch, 0 to create; 412 conditionNotMet, 404 for no object
// and, on the bucket listing, for a missing bucket, 403, 429, 503) and S3
// (GET, PUT with If-Match or If-None-Match: *; 412, 409
// ConditionalRequestConflict, 404 NoSuchKey (on If-Match of a deleted
// record too) and NoSuchBucket, 403 AccessDenied, 503 SlowDown, 500). A
// request not sent is a refused connection, a lost response a reset or a
// 5xx, and a write applied but reported lost a 5xx after it was applied,
// which the backend's own retry then meets as 412. The storage client's
// read retries and the gcs Decider's write retries are jittered by the
// process-wide random source: each retry is held until the end of its
// backoff window, so that the store sees it at an instant the seed fixes;
// the S3 client's retries use a fixed backoff and no retry quota.
//
// Clocks also step: a slot's wall clock jumps to a new offset within the
// skew bound (waits already armed keep their virtual instant, as a real
// host's timers run on its monotonic clock). Readings carry no monotonic
// part, so the TimeView's monotonic half is not exercised: a suspended host
// is modelled by a pause (its wall clock runs on, nothing of it runs, its
// timers fire only once it resumes).
//
// Workers: an incarnation's OnElected may return at once (while faults
// last; such workers are redeployed when the faults stop, as the engine
// rightly sits out up to 16 terms after such tenures), run long actions
// (Term/8 to Term, ignoring its context), or reuse its predecessor's
// LeaderID after a restart; ExpectedCandidates ranges over 1 to 50. About
// half the slots attach a legrpc.Guard and receive calls through its
// interceptor; an admitted call works Term/16 to Term/2 and, once its
// context ends, finishes up within Term/32. Watchers (0 to 2) run
// WatchConfig.Watch on their own clocks; half of them have a fault-free
// store access ("clean"), the others meet stale reads, latency and push
// faults (not failed reads: Watch spaces its retries with the process-wide
// random source, which would make runs irreproducible).
//
// Resolvers (0 to 2) run legrpc's resolver (Builder.Build), built at a
// random instant of the fault phase, on their own clocks, handing what
// they resolve to a recording resolver.ClientConn, and poked with
// ResolveNow every Term/4 to 2 x Term; each incarnation publishes its own
// address. Half of them are clean; the others meet latency, stale reads
// and push faults but no failed reads (legrpc starts the watcher on a
// context of its own, so its retries are not seeded; for the same reason
// the watcher's reads that confirm an absence are held to the end of its
// backoff window). The resolver reads from two goroutines at once, each
// with its own fault stream.
//
// Processes: a pause freezes an incarnation: every call to its clock and to
// the store blocks at the process's gate, and responses are delivered only
// once it resumes; timers still fire. A stall pauses it right after its next
// clock reading, so it goes on with a stale time. A crash freezes it for the
// rest of the run (no release; requests already sent still land); crashed
// processes are reaped at the end. A stop cancels Acquire's context (with
// DisableRelease, about a quarter of the incarnations, it is an abandon). A
// restart starts a new incarnation with a new LeaderID on the same host. The
// leader's worker (OnElected) acts every Term/16 on a downstream system,
// passing tv.Term() as the fencing token, after checking tv.ValueInFuture();
// it sometimes pauses between the check and the action (the case only
// fencing covers), and sometimes returns on its own (a step-down).
//
// # Checks
//
// Mutual exclusion: a TimeView only moves forward right after a store
// response (an acquisition, an extension, or a write read back), so the
// checker compares every TimeView at each instant a response is delivered,
// after synctest.Wait has let the goroutines woken at that instant finish,
// using each holder's own clock read without faults. Between two such
// instants a TimeView can only run out, so checking at each is exact. A
// sampler does the same every TermLength/50, and every election is checked
// when OnElected is called. A valid TimeView must also hold an expiry the
// store accepted for that leader and term. The store checks, as it applies
// each write, that it was conditioned on the current version, that election
// numbers go up by one, that a new tenure's term is above every earlier one
// (a late copy of a create applied before, landing after a deletion, brings
// back that tenure and is no new one), that other writes continue the tenure they replace, and that a takeover
// happens only once the previous holder's clock has passed its expiry (or it
// released).
//
// Fencing: each election (OnElected with a valid TimeView) has a term above
// every earlier one; the downstream, which rejects tokens below the highest
// it has seen, must never accept an older token after a newer one, and the
// quick sweep requires that some stale actions were actually rejected.
//
// Liveness: once the faults stop, a live candidate must hold a valid TimeView
// within Scenario.RecoveryBound (TermLength + 2 x MaxClockSkew, for the offset
// between the two clocks, + herd jitter + store round trips; a term, a poll
// interval and a read's backoff more in runs that delete the record, which can
// hold a candidate off for two terms; counted from its commit instead, when
// the stored record is an extension sent after the faults stopped whose answer
// came after its holder's term ran out, which the engine leaves to expire) and
// keep it; a graceful stop of the leader must be taken over within
// Scenario.HandoverBound and, when the poll interval allows it, before the
// released term would have run out. Cost: in the quiet phase each candidate
// stays within the design's budget of writes, reads and change waits per term
// (8 more writes and change waits after a slow-store phase, or for a
// participant one of whose last 8 writes before the quiet phase took over a
// fifth of the term: the leader times extensions from the slowest of its last
// 8 writes); at any time, no incarnation makes more than its per-term budget
// (below), or 100 calls at one virtual instant (a busy loop, which the store
// then breaks by making each call take a millisecond).
//
// Engine callbacks and extensions: an elected context that has not ended
// once its TimeView has expired on its holder's clock (1 µs of slack, none
// while the process is frozen; after wall-clock steps forward during the
// tenure, their sum and TermLength/16 more) is a violation; OnOusting comes after
// OnElected returned, exactly once per tenure; LeaderChanged reports each
// tenure once, in order, and before OnElected. No release is sent while a
// guarded call or long action admitted under the tenure still runs.
// Watchers' reports come in order (election numbers go up; an expiry or a
// deletion names the last record reported); a clean watcher reports every
// tenure and every deletion that lasted longer than its PollInterval plus
// round trips; no report names as current a term that had ended, on the
// watcher's clock, when the store served it. Deletion: two valid TimeViews
// are allowed only when the older's record was deleted and the newer
// leader never saw a record of it (counted, not a violation); terms still
// only go up, but for a tenure whose record was deleted before its holder
// knew itself elected (a read-back served before the deletion, answered
// after it), below terms begun by candidates that never saw it: the same
// limit, and the downstream rejects its lower token. Cost in every phase: a participant's store calls in any
// term-length window stay within 8 x its design budget (2 + 2 x Term /
// PollInterval) + 60; past that each call takes Term/64, so that the run
// can go on. Polls in step: no two participants read within 100 µs of each
// other 32 times in a row (pollers on schedules of their own part within a
// span of their grids, 16 polls; pollers that share one read in step for
// good).
//
// Cloud backends: every call's answer must match what its attempts met:
// a definite class (lost race, throttled, refused) only if the store
// applied none of its attempts, even later, and some attempt got that
// answer; success only for a write the store applied.
//
// Resolvers: a state never names a leader from a record whose term had
// ended, on the resolver's clock, when the store served it; a clean
// resolver stops naming a leader within 4 x the quiet latency of the
// expiry (on its clock) or release of the newest record of it that it
// was served; states never name an older tenure after a newer one; in the
// quiet phase, a resolver names the live leader once it has led for a
// poll interval and a few round trips (a term more for a resolver that
// met faults).
//
// Checked clocks: the store reports commit times from its own clock
// (virtual time) at a precision drawn per run (none, ns, µs, ms or whole
// seconds, truncated, through every backend); half the runs give
// candidates a Config.Observer, and most of those with commit times set
// EnforceMaxClockSkew too, with one slot's clock 0.55 to 0.65 x
// MaxClockSkew from the store's and the others within 0.1 x (every pair
// still within MaxClockSkew). Every offset bound the engine reports
// (EventClockOffset) must contain the host's true offset at some instant
// of its samples' window. With EnforceMaxClockSkew, a candidate whose
// bound shows it further than MaxClockSkew/2 sends no write of an
// election number it has not tried before (no acquisition, no further
// extension: it steps down) while the samples behind that bound are young
// enough for the engine to hold them. Such a candidate campaigns again
// once its evidence has aged out, and may win and step down at once: the
// quiet phase's liveness bounds are then not checked.
//
// Shutdown: every Acquire must return context.Canceled within 2 x TermLength
// + MaxClockSkew of its context's end; synctest fails a run whose goroutines
// outlive it, and Run records that as a goroutine-leak violation.
//
// # Reproducibility
//
// A seed fixes the whole course of a run: the scenario, the clocks, each
// incarnation's store faults and worker faults (separate streams, as they are
// drawn on different goroutines), and the engine's own random choices (jitter,
// backoff, write ids), which Acquire draws from a seeded source handed over
// through internal/hooks. Goroutines that wake at the same virtual instant
// still run in no fixed order, so the sim keeps that order from mattering:
// goroutines a pause held resume in the order they arrived, a nanosecond
// apart; a stall catches every goroutine that reads the clock at its instant;
// a call ended by its context reports the same error whether a deadline or a
// cancellation due at that instant came first; and a reaped process's last
// steps are not recorded. The engine does its part: a leader extends, or
// steps down for clock skew, a nanosecond after the instant that calls for
// it, so that an OnElected returning at that instant is seen first. The
// history's digest treats the events of one instant as a set. TestReplay
// runs seeds twice (EnforceMaxClockSkew ones too) and requires the same
// events at the same instants, and each negative control reruns the seed
// that caught it.
//
// # Entry points
//
//	go test ./internal/sim/                       # quick sweep + negative controls
//	go test ./internal/sim/ -run 'TestSweep$' -seeds 100000 -v   # long sweep
//	go test ./internal/sim/ -run 'TestSweep$' -seed 42 -v        # one seed, full history
//	go test ./internal/sim/ -run 'TestSweep$' -seed 42 -repeat 10 -v
package sim
