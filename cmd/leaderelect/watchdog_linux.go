//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The watchdog is a second process that SIGKILLs COMMAND's process group at
// the end of the term unless told of an extension, so that the kill does not
// depend on the supervisor (leaderelect run) being scheduled: a supervisor
// that is stopped (SIGSTOP, a debugger), starved of CPU or swapped out
// cannot extend the term either, and a successor may then be elected while
// COMMAND still runs. The watchdog runs in a session of its own, so that job
// control signals meant for the supervisor's terminal do not stop it.
//
// The supervisor writes lines to the watchdog's stdin:
//
//	deadline NS   kill at CLOCK_BOOTTIME NS unless a later deadline comes
//	pgid N        COMMAND's process group
//	done          COMMAND has been reaped: exit without killing
//
// The watchdog writes one line to its stdout, another pipe:
//
//	ready         the first deadline is read and the timer set
//
// The supervisor starts COMMAND only once it has read that line: the
// watchdog is a process of its own, exec'd anew, and can take a long time to
// come up (a race-built binary on a loaded machine took seconds), in which
// a frozen supervisor would leave COMMAND unguarded. Meanwhile it goes on
// writing the term's extensions (see awaitWatchdog). A watchdog that exits
// first (its stdout reaches EOF) or is not ready in time is killed, and
// COMMAND is not started in that tenure. A pipe, unlike a
// signal, tells the supervisor also of a watchdog that died; stdout is
// otherwise unused, and both ends of both pipes are close-on-exec in the
// supervisor, so that COMMAND inherits neither.
//
// When stdin closes without "done" (the supervisor died), the watchdog still
// kills at the last deadline. A supervisor that cannot write to the watchdog
// (it is stopped and the pipe is full, or it is gone) stops COMMAND and ends
// its tenure, and kills the watchdog once COMMAND has been reaped: a
// watchdog left with a stale deadline would kill a process group that may
// by then be someone else's. CLOCK_BOOTTIME goes on across a suspend of the
// host, as the other candidates' clocks do, where CLOCK_MONOTONIC (and so Go's
// timers) would stop.
const watchdogCommand = "__watchdog"

// watchdogEnv is set in the watchdog's environment, to the supervisor's pid.
const watchdogEnv = "_LEADERELECT_WATCHDOG"

// bootNow is CLOCK_BOOTTIME in nanoseconds.
func bootNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_BOOTTIME): %v", err))
	}
	return ts.Nano()
}

// watchdogReady is the line the watchdog writes to its stdout once armed.
const watchdogReady = "ready"

// watchdog is the supervisor's end of a watchdog process.
type watchdog struct {
	cmd *exec.Cmd
	in  *os.File
	// ready receives nil once the watchdog has set its timer, or why it
	// never will (it exited first).
	ready   <-chan error
	timeout time.Duration // the longest a write may block
	last    time.Time     // the kill time last sent
	err     error         // the first write error; nothing is sent after it
}

// startWatchdog starts the watchdog process, to kill at killBy. It is armed
// only once it says so on w.ready. A write to it that blocks for longer than
// timeout fails.
func startWatchdog(killBy time.Time, timeout time.Duration) (*watchdog, error) {
	// /proc/self/exe runs this very binary even if it was replaced or
	// deleted since it started.
	if os.Getenv(watchdogEnv) != "" {
		// This binary did not take watchdogCommand for its own (a test
		// binary, say): never start watchdogs from watchdogs.
		return nil, errors.New("started as a watchdog: not starting another")
	}
	cmd := exec.Command("/proc/self/exe", watchdogCommand)
	// The supervisor names itself: os.Getppid in the watchdog would say
	// 1 (or a subreaper) had the supervisor died before it asked.
	cmd.Env = append(os.Environ(), watchdogEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	r, in, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = r
	out, outW, err := os.Pipe()
	if err != nil {
		r.Close()
		in.Close()
		return nil, err
	}
	cmd.Stdout = outW
	ready := make(chan error, 1)
	w := &watchdog{cmd: cmd, in: in, ready: ready, timeout: timeout}
	// The deadline is in the pipe before the process exists: the first
	// line it reads.
	w.arm(killBy)
	if w.err != nil {
		r.Close()
		in.Close()
		out.Close()
		outW.Close()
		return nil, fmt.Errorf("arming the watchdog: %w", w.err)
	}
	err = cmd.Start()
	r.Close()
	outW.Close() // the watchdog's alone now: EOF once it exits
	if err != nil {
		in.Close()
		out.Close()
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	go func() {
		defer out.Close()
		line, err := bufio.NewReader(out).ReadString('\n')
		switch {
		case line == watchdogReady+"\n":
			ready <- nil
		case err == io.EOF && line == "":
			<-exited
			ready <- fmt.Errorf("it exited (%v) before setting its timer", cmd.ProcessState)
		default:
			ready <- fmt.Errorf("it wrote %q (%v) instead of %q", line, err, watchdogReady)
		}
	}()
	return w, nil
}

func (w *watchdog) send(format string, args ...any) {
	if w.err != nil {
		return
	}
	// A watchdog that someone stopped must not block the supervisor once
	// the pipe is full.
	_ = w.in.SetWriteDeadline(time.Now().Add(w.timeout))
	_, w.err = fmt.Fprintf(w.in, format+"\n", args...)
}

// arm moves the kill time to killBy, converted to CLOCK_BOOTTIME. A move of
// less than a millisecond is not sent: killBy is worked out afresh from what
// is left of the term at each look (see termEnd), and moves by the time
// between two clock readings; an extension moves it by a good part of a term.
func (w *watchdog) arm(killBy time.Time) {
	if d := killBy.Sub(w.last); d > -time.Millisecond && d < time.Millisecond {
		return
	}
	w.last = killBy
	w.send("deadline %d", bootNow()+int64(time.Until(killBy)))
}

func (w *watchdog) setGroup(pgid int) { w.send("pgid %d", pgid) }

// disarm tells the watchdog that COMMAND is gone, and lets it exit. It is
// called only once COMMAND has been reaped (or never started); a watchdog
// that cannot be told is killed, as it would otherwise kill the process
// group COMMAND led at the last deadline it heard of.
func (w *watchdog) disarm() {
	w.send("done")
	if w.err != nil {
		_ = w.cmd.Process.Kill()
	}
	_ = w.in.Close()
}

// kill ends a watchdog that COMMAND never ran under (it was not ready), in
// place of disarm: one that did not come up is not to be trusted to read
// "done". w is not used after.
func (w *watchdog) kill() {
	_ = w.cmd.Process.Kill()
	_ = w.in.Close()
}

// watchdogMain is the watchdog process. It writes watchdogReady to stdout
// once its timer is first set.
func watchdogMain(stdin io.Reader, stdout, stderr io.Writer) int {
	supervisor, err := strconv.Atoi(os.Getenv(watchdogEnv))
	if err != nil || supervisor <= 1 {
		supervisor = 0 // unknown: only the group the supervisor names is killed
	}
	// Lines come in batches, every complete line read so far: a deadline
	// long past when this process got to read it (the term was short, or
	// this process slow to start) must not kill while the "pgid" and
	// "done" written after it wait unread. Killing then would, with the
	// group unknown, kill every group the supervisor leads, a command of
	// its next tenure among them.
	lines := make(chan []string)
	go func() {
		br := bufio.NewReader(stdin)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			batch := []string{strings.TrimSuffix(l, "\n")}
			for {
				buffered, _ := br.Peek(br.Buffered())
				if !bytes.Contains(buffered, []byte("\n")) {
					break
				}
				l, _ := br.ReadString('\n')
				batch = append(batch, strings.TrimSuffix(l, "\n"))
			}
			lines <- batch
		}
	}()
	tfd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_CLOEXEC)
	if err != nil {
		fmt.Fprintf(stderr, "leaderelect run: watchdog: timerfd_create: %v\n", err)
		return exitFailed
	}
	fired := make(chan struct{}, 1)
	go func() {
		var buf [8]byte
		for {
			if _, err := unix.Read(tfd, buf[:]); err != nil && err != unix.EINTR {
				return
			}
			select {
			case fired <- struct{}{}:
			default:
			}
		}
	}()
	var deadline int64 = -1 // not armed yet
	pgid := 0
	armed, readySent := false, false
	// take acts on a batch of lines; it reports whether "done" was among
	// them.
	take := func(batch []string) bool {
		for _, l := range batch {
			verb, arg, _ := strings.Cut(l, " ")
			n, _ := strconv.ParseInt(arg, 10, 64)
			switch verb {
			case "done":
				return true
			case "pgid":
				pgid = int(n)
			case "deadline":
				deadline = n
				spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(n, 1))}
				if err := unix.TimerfdSettime(tfd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
					fmt.Fprintf(stderr, "leaderelect run: watchdog: timerfd_settime: %v\n", err)
				} else {
					armed = true
				}
			}
		}
		return false
	}
	for {
		select {
		case batch, ok := <-lines:
			if !ok {
				// The supervisor is gone; the deadline holds.
				lines = nil
				if deadline < 0 {
					return exitOK
				}
				continue
			}
			if take(batch) {
				return exitOK
			}
		case <-fired:
			// Lines read but not yet taken come first.
			select {
			case batch, ok := <-lines:
				if ok && take(batch) {
					return exitOK
				}
			default:
			}
		}
		if deadline >= 0 && bootNow() >= deadline {
			killed := killCommand(supervisor, pgid)
			fmt.Fprintf(stderr, "leaderelect run: watchdog: the term is ending without an extension reaching the watchdog: killed the command's process group %v\n", killed)
			return exitOK
		}
		if armed && !readySent {
			// (Not for a first deadline already past, which killed
			// and exited above: the supervisor then reads EOF.)
			readySent = true
			_, _ = fmt.Fprintln(stdout, watchdogReady)
		}
	}
}

// killCommand SIGKILLs process group pgid and, should the supervisor have
// been stopped before it could say which group that is, every process group
// led by a child of the supervisor other than this process (COMMAND leads its
// own).
func killCommand(supervisor, pgid int) []int {
	var killed []int
	if pgid > 0 && syscall.Kill(-pgid, syscall.SIGKILL) == nil {
		killed = append(killed, pgid)
	}
	if pgid > 0 || supervisor <= 1 {
		// Never the children of init or of an unknown process: they
		// are every session on the host.
		return killed
	}
	eachProcess(func(pid int, _ string, ppid, pg int) {
		if pid != os.Getpid() && ppid == supervisor && pg == pid && syscall.Kill(-pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	})
	return killed
}

// eachProcess calls f with the pid, state (R, S, D, Z...), parent and process
// group of every process /proc shows.
func eachProcess(f func(pid int, state string, ppid, pgrp int)) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		// After the name: state ppid pgrp ...
		fs := strings.Fields(string(stat[i+1:]))
		if len(fs) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(fs[1])
		pg, _ := strconv.Atoi(fs[2])
		f(pid, fs[0], ppid, pg)
	}
}

// awaitGroupGone waits until no process of group pgid (COMMAND's, sent
// SIGKILL) is alive, or held reports false, and says whether the group is
// gone. SIGKILL ends a process only once each of its threads leaves the
// kernel, which one in an uninterruptible wait (a disk or NFS write) does
// when the wait ends: until then its write may still land. Zombies count as
// gone: they do nothing more, and whether they are reaped is up to their
// parent (init, which in a container may never do it). A process whose main
// thread is a zombie may still have threads running: those count.
func awaitGroupGone(pgid int, held func() bool) bool {
	wait := time.Millisecond
	for {
		alive := false
		eachProcess(func(pid int, state string, _, pg int) {
			alive = alive || (pg == pgid && (!dead(state) || threadsAlive(pid)))
		})
		if !alive {
			return true
		}
		if !held() {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// dead reports a process or thread state that does nothing more: a zombie,
// or dead.
func dead(state string) bool { return state == "Z" || state == "X" }

// threadsAlive reports whether a thread of process pid is alive.
func threadsAlive(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(dir)
	for _, t := range tasks {
		stat, err := os.ReadFile(dir + t.Name() + "/stat")
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 0 && !dead(f[0]) {
				return true
			}
		}
	}
	return false
}
