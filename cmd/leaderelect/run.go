package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
	"github.com/racedecider/leaderelection/internal/redact"
	"github.com/racedecider/leaderelection/memory"
)

const runDescription = `
Campaigns for leadership of the election kept at the store URL and, while
this process leads, runs COMMAND. Run the same line on several machines (or
several times on one): at most one of them runs COMMAND at any moment.

COMMAND gets these environment variables:
  LEADER_ID      this candidate's id (--id)
  LEADER_TERM    the fencing token: a number that grows with every new leader.
                 Pass it to any system COMMAND writes to, and have that system
                 refuse writes carrying a smaller token than it has seen.
  LEADER_EXPIRY  when the term ends unless extended (RFC 3339), as of the start;
                 leaderelect extends it twice per term while COMMAND runs.

If the term cannot be extended (the store cannot be reached), COMMAND gets
SIGTERM a quarter of a term (or --grace, if shorter) before the term ends,
and SIGKILL just before. When leadership ends early otherwise (the store
refused an extension, or this host's clock is too far from the store's),
COMMAND gets SIGTERM, then SIGKILL after --grace, and is always killed
before the term ends: no other candidate can be elected while it still
runs. leaderelect then campaigns again.

When another candidate has taken over (the store holds a newer write than
this leader's), there is no grace: COMMAND gets SIGTERM and, at once,
SIGKILL. The term has ended for this process, and another leader may
already be acting. (Candidates take over only once the term has ended plus
--skew by their clocks, so this is a leader whose clock was off, or that
was paused or cut off from the store until then.)

When COMMAND exits, leaderelect releases the term, so that another candidate
takes over at once, and exits with COMMAND's status; with --restart it
campaigns again instead and runs COMMAND again when elected (waiting 0.5s
to 1s, doubling up to 1m, jittered, after a COMMAND that ran for less than a
term), whatever its status. Only a COMMAND that cannot be started ends run
with 126 or 127 even with --restart.

SIGINT, SIGTERM, SIGHUP or SIGQUIT to leaderelect sends SIGTERM to COMMAND
(a second signal sends SIGKILL), keeps the term extended while COMMAND
stops, then releases the term and exits by the same signal (SIGQUIT: with
status 131, and no goroutine dump). SIGHUP and SIGINT stay ignored when
leaderelect starts with them ignored (nohup, a background job of a
script). A stderr that can no longer be written (its reader is gone) does
not stop leaderelect: its log lines are lost.
--term must be at least 100ms, for COMMAND to be started within a term.

leaderelect run is not an init: as a container's PID 1 it does not reap
processes orphaned to it (COMMAND's children, once COMMAND's group has been
killed), which stay zombies. Run it under one (docker run --init, tini).

COMMAND runs in its own process group, with stdin from /dev/null; signals go
to the whole group, and any process left in the group when COMMAND exits is
killed (on Linux, the term is released only once they are all gone). On
Linux, a watchdog process (this binary, in a session of its own)
holds the term's deadline on CLOCK_BOOTTIME and SIGKILLs the group when it
passes without an extension, even while leaderelect itself is stopped,
starved of CPU or dead; leaderelect, once resumed, runs COMMAND again only
after winning a new election. COMMAND starts only once the watchdog has set
its timer: a watchdog that exits first, or is not ready within 10s, is
killed, and COMMAND waits for a new election and a new watchdog. Should an extension fail to reach the watchdog
(it was stopped or killed), leaderelect stops COMMAND as if leadership were
lost, and runs it again after a new election with a new watchdog. Not
covered: the whole host paused, and processes that left the group (setsid,
daemons): fence those with LEADER_TERM.

Examples:
  leaderelect run --store file:///var/lib/reports/leader -- ./send-reports
  leaderelect run --store gs://my-bucket/leaders/reports --restart -- ./worker --queue q
  LEADERELECT_STORE=s3://my-bucket/leaders/job?region=eu-west-1 leaderelect run -- ./job
`

func runMain(args []string, stdout, stderr io.Writer) outcome {
	fs := newFlagSet("run", "--store URL [FLAGS] -- COMMAND [ARGS...]", runDescription+"\nStore URLs:\n"+storeURLHelp, stdout, stderr)
	store := fs.String("store", "", "the election's store `URL`")
	id := fs.String("id", "", "this candidate's `ID`, unique per process (default HOST-PID-RANDOM)")
	term := fs.Duration("term", leaderelection.DefaultTermLength, "how long a term lasts unless extended; a crashed leader is replaced after at most term + skew")
	skew := fs.Duration("skew", leaderelection.DefaultMaxClockSkew, "the most any two candidates' clocks may differ")
	grace := fs.Duration("grace", 0, "how long COMMAND has to exit after SIGTERM before SIGKILL; must be less than term - skew (default the smaller of 10s and a quarter of --term)")
	restart := fs.Bool("restart", false, "when COMMAND exits, campaign again and rerun it instead of exiting")
	quiet := fs.Bool("quiet", false, "log only warnings and errors")
	// A write to a closed stderr (a log shipper that died, a pipe to a
	// closed reader) must fail, not kill run: COMMAND would die with it by
	// SIGKILL and the term would not be released.
	defer notifyBrokenPipe()()
	if o, ok := fs.parse(args); !ok {
		return o
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fs.usageError("no COMMAND given: leaderelect run --store URL [FLAGS] -- COMMAND [ARGS...]")
	}
	// Before COMMAND is looked up, whose error would quote it: a store URL
	// given without --store comes first in argv, password and all.
	if strings.Contains(argv[0], "://") {
		what := "is required"
		if *store != "" {
			what = "is given"
		}
		return fs.usageError("COMMAND %q looks like a store URL, and --store %s: did you mean --store URL? (leaderelect run --store URL [FLAGS] -- COMMAND [ARGS...])",
			redact.Accepting(argv[0], nil), what)
	}
	if *store == "" {
		return noStore(fs)
	}
	if *id == "" {
		*id = defaultID()
	}
	if !fs.isSet("grace") {
		*grace = defaultGrace(*term)
	}
	problems := timingProblems(*term, *skew)
	if !utf8.ValidString(*id) {
		// Acquire would refuse it (the record is JSON), and run would
		// then blame the store.
		problems = append(problems, fmt.Sprintf("--id %q is not valid UTF-8", *id))
	}
	if *grace < 0 && fs.isSet("grace") {
		// (One worked out from an invalid --term is not the user's.)
		problems = append(problems, fmt.Sprintf("--grace (%s) must not be negative", *grace))
	} else if len(problems) == 0 && *grace >= *term-*skew {
		problems = append(problems, fmt.Sprintf("--grace (%s) must be less than --term (%s) minus --skew (%s), so that COMMAND can stop within a term", *grace, *term, *skew))
	}
	if len(problems) == 0 && *term < minRunTerm {
		problems = append(problems, fmt.Sprintf("--term (%s) is too short for run: at least %v, so that COMMAND (and, on Linux, its watchdog process) can be started well within a term", *term, minRunTerm))
	}
	if len(problems) > 0 {
		return fs.usageError("%s", joinLines(problems))
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		fmt.Fprintf(stderr, "leaderelect run: %v\n", err)
		return outcome{code: execFailureCode(err)}
	}
	d, _, o, ok := openStore(fs, *store, 30*time.Second)
	if !ok {
		return o
	}
	level := slog.LevelInfo
	if *quiet {
		level = slog.LevelWarn
	}
	r := &runner{
		fs:        fs,
		store:     redact.URL(*store),
		decider:   d,
		argv:      argv,
		id:        *id,
		term:      *term,
		skew:      *skew,
		grace:     *grace,
		restart:   *restart,
		engineLog: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		stop:      make(chan struct{}),
		kill:      make(chan struct{}),
	}
	r.log = r.engineLog.With("leader_id", *id)
	if _, ok := d.(*memory.Decider); ok {
		// At most one of them runs COMMAND only if they share a store.
		r.log.Warn("mem:// is this process's own memory: no other leaderelect shares the election, and each one runs COMMAND at once (use file:// on one host)")
	}
	return r.run()
}

// minRunTerm is the shortest --term run takes. Starting COMMAND takes a few
// milliseconds (and starting its watchdog process as many again), and it
// is started only while the term has more left than --grace and the lead
// of the final SIGKILL: with a term of a few milliseconds, every tenure ran
// out before COMMAND could start, and run campaigned for ever, warning each
// time that the term was about to end.
const minRunTerm = 100 * time.Millisecond

// stopSignals are the signals that stop run gracefully: COMMAND gets
// SIGTERM (SIGKILL at a second one), the term is released, and run exits
// by the signal (SIGQUIT: with status 131, not a goroutine dump). SIGHUP,
// which a closed terminal or a service manager sends, would otherwise end
// run at once, and COMMAND with it by SIGKILL, with no grace and the term
// not released.
var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// caughtStopSignals is stopSignals less SIGHUP and SIGINT where this process
// started with them ignored: under nohup, or as a background job of a
// script. signal.Notify would catch them again, and a hangup or an
// interrupt meant for others would stop COMMAND and end the tenure.
func caughtStopSignals() []os.Signal {
	var caught []os.Signal
	for _, s := range stopSignals {
		if (s == syscall.SIGHUP || s == syscall.SIGINT) && signal.Ignored(s) {
			continue
		}
		caught = append(caught, s)
	}
	return caught
}

// defaultGrace is --grace when not given: long enough for most commands to
// clean up, and short enough for any valid --term (a quarter of it is always
// less than term - skew, since skew < term/2).
func defaultGrace(term time.Duration) time.Duration {
	return min(10*time.Second, term/4)
}

func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:6])
}

// runner is one leaderelect run.
type runner struct {
	fs                *flagSet
	store             string // its URL, for messages (passwords redacted)
	decider           leaderelection.RaceDecider
	argv              []string
	id                string
	term, skew, grace time.Duration
	restart           bool
	// log is for the runner's messages; engineLog, for the engine's, which
	// adds the leader id itself.
	log, engineLog *slog.Logger

	mu sync.Mutex
	// cancelAcquire ends the current Acquire call, which releases the term
	// once OnElected has returned.
	cancelAcquire context.CancelFunc
	// inElected is true while onElected runs; it then owns the shutdown.
	inElected bool
	// signal is the first SIGINT or SIGTERM received; stop is closed then,
	// and kill at the second.
	signal     syscall.Signal
	stop, kill chan struct{}
	// exited is set when COMMAND exited by itself (or could not start).
	exited *exitResult
}

type exitResult struct {
	code int
	ran  time.Duration
	// startFailed: COMMAND could not be started, and code is
	// leaderelect's (126 or 127), not COMMAND's own exit status.
	startFailed bool
}

func (r *runner) run() outcome {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, caughtStopSignals()...)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go r.handleSignals(sigs, done)

	wait := restartBackoff
	for {
		ctx, cancel := context.WithCancel(context.Background())
		r.mu.Lock()
		r.cancelAcquire = cancel
		r.exited = nil
		stopping := r.signal != 0
		r.mu.Unlock()
		if stopping {
			cancel()
			break
		}
		r.log.Info("campaigning", "store", fmt.Sprint(r.decider), "term", r.term, "skew", r.skew)
		cfg := leaderelection.Config{
			Decider:      r.decider,
			LeaderID:     r.id,
			TermLength:   r.term,
			MaxClockSkew: r.skew,
			OnElected:    r.onElected,
			LeaderChanged: func(_ context.Context, e entry.RaceEntry) {
				if e.LeaderID != r.id {
					r.log.Info("another candidate leads", "leader", e.LeaderID, "term", e.Term, "expiry", e.TermExpiry)
				}
			},
			Logger: r.engineLog,
		}
		err := cfg.Acquire(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			// Acquire gives up only on what retrying cannot heal: a store
			// that refuses (entry.ErrRefused: permission denied, no such
			// bucket or directory), a corrupt record, a bad config.
			what := "failed"
			if errors.Is(err, leaderelection.ErrRefused) {
				what = "refused"
			}
			r.log.Error("giving up", "err", err)
			return r.fs.failed("the store %s %s: %v", r.store, what, err)
		}
		r.mu.Lock()
		stopping, exited := r.signal != 0, r.exited
		r.mu.Unlock()
		if stopping {
			break
		}
		if exited == nil {
			// Only a signal or COMMAND's exit cancels Acquire.
			r.log.Error("campaign ended unexpectedly")
			return outcome{code: exitFailed}
		}
		if exited.startFailed || !r.restart {
			return outcome{code: exited.code}
		}
		if exited.ran >= r.term {
			wait.Reset()
		}
		pause := wait.Next()
		r.log.Info("campaigning again to restart the command", "after", pause)
		select {
		case <-time.After(pause):
		case <-r.stop:
		}
	}
	r.log.Info("stopped", "signal", r.signal.String())
	if r.signal == syscall.SIGQUIT {
		// Go's own action for SIGQUIT, which reraise would leave it
		// to, dumps every goroutine and exits 2: exit as a shell
		// reports a process SIGQUIT ended instead.
		return outcome{code: 128 + int(syscall.SIGQUIT)}
	}
	return outcome{signal: r.signal}
}

// restartBackoff spaces out run --restart's campaigns after COMMAND exited:
// 0.5 to 1 s, doubling up to a minute, and back to the start after a COMMAND
// that ran for a term or more. The jitter keeps processes whose commands
// failed together (a dependency down for all) from coming back in step.
var restartBackoff = backoff.Backoff{Min: time.Second, Max: time.Minute}

func (r *runner) handleSignals(sigs <-chan os.Signal, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case s := <-sigs:
			sig, _ := s.(syscall.Signal)
			r.mu.Lock()
			switch {
			case r.signal == 0:
				r.signal = sig
				close(r.stop)
				r.log.Info("received a signal: stopping", "signal", sig.String())
				if !r.inElected && r.cancelAcquire != nil {
					// (nil before the first campaign, which sees
					// r.signal and does not begin.)
					r.cancelAcquire()
				}
			case r.kill != nil:
				close(r.kill)
				r.kill = nil
				r.log.Warn("received a second signal: killing the command now", "signal", sig.String())
			}
			r.mu.Unlock()
		}
	}
}

func (r *runner) onElected(ctx context.Context, tv *leaderelection.TimeView) {
	r.mu.Lock()
	if r.signal != 0 {
		// Stopping: Acquire's context is already cancelled.
		r.mu.Unlock()
		return
	}
	r.inElected = true
	kill := r.kill
	r.mu.Unlock()

	exited, pgid := r.supervise(ctx, tv, kill)

	r.mu.Lock()
	r.inElected = false
	if exited != nil {
		r.exited = exited
	}
	if exited != nil || r.signal != 0 {
		// Step down: Acquire releases the term once we return.
		r.cancelAcquire()
	}
	r.mu.Unlock()
	// The term is released (by Acquire) once this returns, if still held:
	// not before every process of COMMAND's group is gone (see
	// awaitGroupGone), and no later than the end of the term as it stands
	// now. Where Acquire was cancelled or leadership ended, the term is no
	// longer extended, and a process still alive then leaves it to
	// expire. Where COMMAND was stopped for a watchdog that cannot be told
	// of extensions, or for a term about to end whose extension then
	// landed, Acquire goes on extending it: the bound keeps a process
	// that lives on past SIGKILL from holding the term for ever, and the
	// term is released after it even so.
	if pgid > 0 {
		end := termEnd(tv)
		held := func() bool { return tv.ValueInFuture() && time.Now().Before(end) }
		if !awaitGroupGone(pgid, held) {
			r.log.Warn("processes of the command's group are still alive after SIGKILL (in an uninterruptible wait?)", "pgid", pgid)
		}
	}
}

// killLead is how long before the term ends a COMMAND that is still running
// gets SIGKILL, so that it is gone by then.
func (r *runner) killLead() time.Duration { return min(r.term/20, 250*time.Millisecond) }

// stopAt is when COMMAND gets SIGTERM unless the term ending at end (see
// termEnd) is extended first: --grace before it must be gone (at most a
// quarter term), and never later than a little before, so that an extension
// that lands until then reaches the watchdog before it would kill (with
// --grace 0, the two would act at one instant).
func (r *runner) stopAt(end time.Time) time.Time {
	return end.Add(-r.killLead() - max(min(r.grace, r.term/4), r.killLead()/2))
}

// termEnd is when the term tv holds ends unless it is extended: now plus
// what is left of it, on the shorter of this process's wall and monotonic
// clocks. tv.Get() is the wall clock's alone: after a step back of the wall
// clock it is late by the step, and COMMAND would be stopped that much late
// (where no watchdog on CLOCK_BOOTTIME stands behind it, or it cannot be
// told of extensions).
func termEnd(tv *leaderelection.TimeView) time.Time {
	return time.Now().Add(tv.Remaining())
}

// supervise runs COMMAND while this candidate leads. It returns how COMMAND
// exited when it exited by itself (or could not be started), and nil when it
// was stopped; and COMMAND's process group, which got SIGKILL once COMMAND
// was reaped (0 if it never started).
func (r *runner) supervise(ctx context.Context, tv *leaderelection.TimeView, kill <-chan struct{}) (exited *exitResult, pgid int) {
	if !tv.ValueInFuture() {
		return nil, 0
	}
	env := append(os.Environ(),
		"LEADER_ID="+r.id,
		"LEADER_TERM="+strconv.FormatInt(tv.Term(), 10),
		"LEADER_EXPIRY="+tv.Get().UTC().Format(time.RFC3339Nano),
	)
	// COMMAND starts only once the watchdog has set its timer (see
	// awaitWatchdog), so that it never runs unguarded. A watchdog that
	// cannot be started at all (none on this system, exec failed) leaves
	// the kill to this process, as the warning says.
	wd, err := startWatchdog(termEnd(tv).Add(-r.killLead()), min(time.Second, r.term/8))
	if err != nil {
		r.log.Warn("no watchdog: the command is killed at the end of the term only while leaderelect itself runs", "err", err)
		wd = nil
	}
	defer func() {
		if wd != nil {
			wd.disarm()
		}
	}()
	if wd != nil {
		if reason := r.awaitWatchdog(ctx, tv, wd); reason != "" {
			wd.kill()
			wd = nil
			r.log.Warn("not starting the command: "+reason, "term", tv.Term())
			return nil, 0
		}
	}
	if !time.Now().Before(r.stopAt(termEnd(tv))) {
		// Starting the watchdog took what was left of the term: COMMAND
		// would be stopped as soon as it started.
		r.log.Warn("not starting the command: the term is about to end and could not be extended", "term", tv.Term())
		return nil, 0
	}
	c, err := startChild(r.argv, env)
	if err != nil {
		r.log.Error("could not start the command", "err", err)
		return &exitResult{code: execFailureCode(err), startFailed: true}, 0
	}
	if wd != nil {
		wd.setGroup(c.pid)
	}
	started := time.Now()
	r.log.Info("elected: started the command", "term", tv.Term(), "pid", c.pid)

	var (
		termSent, killSent, killNow bool
		// overdue: the watchdog's kill time passed before it was told of
		// a later one (this process was stopped or starved meanwhile).
		overdue   bool
		stopBegan time.Time
		ctxDone   = ctx.Done()
		stop      = r.stop
	)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		end := termEnd(tv)
		killBy := end.Add(-r.killLead())
		var next time.Time
		switch {
		case !termSent:
			stopAt := r.stopAt(end)
			reason := ""
			switch {
			case ctx.Err() != nil:
				reason = "leadership ended"
			case isClosed(r.stop):
				reason = "leaderelect is stopping"
			case !now.Before(stopAt):
				reason = "the term is about to end and could not be extended"
			case wd != nil && wd.err != nil:
				// It goes on with the last deadline it heard of, or
				// is gone: either way it no longer tracks the term,
				// and COMMAND would be unguarded should this process
				// freeze. The next tenure starts a new watchdog.
				reason = "the watchdog cannot be told of extensions (" + wd.err.Error() + ")"
			}
			if reason != "" {
				r.log.Warn("stopping the command: "+reason, "pid", c.pid, "signal", "SIGTERM")
				signalGroup(c.pid, syscall.SIGTERM)
				termSent, stopBegan, stop = true, now, nil
				continue
			}
			next = stopAt
		case !killSent:
			deadline := stopBegan.Add(r.grace)
			if killBy.Before(deadline) {
				deadline = killBy
			}
			if killNow || !now.Before(deadline) {
				r.log.Warn("the command is still running: killing it", "pid", c.pid, "signal", "SIGKILL")
				signalGroup(c.pid, syscall.SIGKILL)
				killSent = true
				continue
			}
			next = deadline
		default:
			next = now.Add(time.Hour)
		}
		if wd != nil && wd.err == nil {
			// Pass each extension on, and look for the next one often
			// enough that the watchdog hears of it well before it would
			// kill.
			overdue = overdue || passedBy(now, wd.last)
			wd.arm(killBy)
			if wd.err != nil && !termSent {
				continue // stop COMMAND now (above)
			}
			next = minTime(next, now.Add(r.term/8))
		}
		timer.Reset(time.Until(next))
		select {
		case ws := <-c.done:
			// Leave nothing of COMMAND's behind to outlive the term.
			signalGroup(c.pid, syscall.SIGKILL)
			code := exitCode(ws)
			if termSent {
				r.log.Info("the command stopped", "pid", c.pid, "status", code)
				return nil, c.pid
			}
			var armed time.Time
			if wd != nil {
				armed = wd.last
			}
			if killedByWatchdog(ws, time.Now(), armed, termEnd(tv).Add(-r.killLead()), overdue) {
				// The watchdog killed it while this process was not
				// running (stopped, starved), perhaps before it heard of
				// an extension: leadership is taken for lost, and
				// COMMAND runs again only after a new election.
				r.log.Warn("the command was killed at the end of the term by the watchdog", "pid", c.pid, "status", code)
				return nil, c.pid
			}
			r.log.Info("the command exited", "pid", c.pid, "status", code)
			return &exitResult{code: code, ran: time.Since(started)}, c.pid
		case <-ctxDone:
			ctxDone = nil
		case <-stop:
			stop = nil
		case <-kill:
			kill, killNow = nil, true
		case <-timer.C:
		}
	}
}

// awaitWatchdog waits until wd has set its timer, and returns why COMMAND
// is not to be started when it stops waiting first: the watchdog exited, or
// cannot be told of extensions, or is not ready when COMMAND would be
// stopped (the term is about to end) or after watchdogPatience, or
// leadership ended, or leaderelect is stopping. The term's
// extensions are passed on meanwhile, so that a watchdog that comes up late
// (seconds, on a loaded host) does not act on a stale deadline; the bound
// keeps a watchdog that never comes up from holding a tenure without
// COMMAND for ever. A tenure given up on ends, and COMMAND waits for a new
// election and a new watchdog.
func (r *runner) awaitWatchdog(ctx context.Context, tv *leaderelection.TimeView, wd *watchdog) (reason string) {
	began := time.Now()
	giveUpAt := began.Add(watchdogPatience)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case err := <-wd.ready:
			if err != nil {
				return "the watchdog process failed: " + err.Error()
			}
			return ""
		case <-ctx.Done():
			return "leadership ended"
		case <-r.stop:
			return "leaderelect is stopping"
		case <-timer.C:
		}
		now, end := time.Now(), termEnd(tv)
		waited := now.Sub(began).Round(time.Millisecond)
		switch {
		case !now.Before(r.stopAt(end)):
			return fmt.Sprintf("the watchdog process had not set its timer %v after it started, and the term is about to end", waited)
		case !now.Before(giveUpAt):
			return fmt.Sprintf("the watchdog process had not set its timer %v after it started", waited)
		}
		wd.arm(end.Add(-r.killLead()))
		if wd.err != nil {
			return "the watchdog cannot be told of extensions (" + wd.err.Error() + ")"
		}
		timer.Reset(time.Until(minTime(minTime(r.stopAt(end), giveUpAt), now.Add(r.term/8))))
	}
}

// watchdogPatience is how long run gives its watchdog process to set its
// timer: a few times what a loaded host was seen to take, and not a long
// term, which a watchdog that never comes up would hold without COMMAND. A
// variable for tests.
var watchdogPatience = 10 * time.Second

// killedByWatchdog reports whether COMMAND, reaped at now with status ws
// without this process having signalled it, is taken to have been killed at
// the end of the term by the watchdog: it died of SIGKILL (the watchdog's
// signal; any other status is COMMAND's own), and a kill time had passed by
// then: the one last sent to the watchdog (armed, zero without a watchdog),
// or the term's as it stands now (killBy), or the watchdog's passed before
// it was told of a later one (overdue, seen at an earlier look).
//
// armed matters where this process was stopped or starved right after an
// extension landed, before it told the watchdog: the watchdog kills at the
// old kill time while the term, extended, has not ended by this process's
// clocks. Each time is compared on the monotonic clock and on the wall
// clock, either of which passing it is enough: the watchdog's is
// CLOCK_BOOTTIME, which goes on across a suspend of the host as the wall
// clock does and Go's monotonic clock does not.
func killedByWatchdog(ws syscall.WaitStatus, now, armed, killBy time.Time, overdue bool) bool {
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return false
	}
	return overdue || passedBy(now, armed) || passedBy(now, killBy)
}

// passedBy reports whether t (not zero) is not after now on the monotonic
// clock or on the wall clock.
func passedBy(now, t time.Time) bool {
	return !t.IsZero() && (!now.Before(t) || !now.Round(0).Before(t.Round(0)))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// child is a running COMMAND.
type child struct {
	pid  int
	done chan syscall.WaitStatus // its status, once reaped
}

// startChild starts argv with env. The goroutine that starts it keeps its OS
// thread locked until the child is reaped: Linux delivers the parent-death
// signal when the creating thread exits, not the process, and the Go
// runtime may otherwise end that thread while the child runs.
func startChild(argv, env []string) (*child, error) {
	c := &child{done: make(chan syscall.WaitStatus, 1)}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = childProcAttr()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.pid = cmd.Process.Pid
		started <- nil
		_ = cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		c.done <- ws
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// exitCode is the status a shell would report for ws: the exit code, or 128
// plus the number of the signal that killed it.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func execFailureCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotExec
}
