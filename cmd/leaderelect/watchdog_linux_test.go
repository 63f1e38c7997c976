//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/internal/testenv"
)

// TestWatchdogTakesEveryLineBeforeKilling: a watchdog that gets to its input
// only once the deadline there has passed (a short term, a slow start)
// reads what the supervisor wrote after it before it kills. Here "done"
// follows: COMMAND was reaped, and nothing is killed. (The watchdog killed
// at the deadline before reading on, with the group unknown: every group
// the supervisor led, a command of its next tenure among them.)
func TestWatchdogTakesEveryLineBeforeKilling(t *testing.T) {
	t.Setenv(watchdogEnv, "") // no supervisor: a kill would be reported, but would kill nothing
	var stderr bytes.Buffer
	code := watchdogMain(strings.NewReader("deadline 1\npgid 0\ndone\n"), io.Discard, &stderr)
	if code != exitOK || strings.Contains(stderr.String(), "killed") {
		t.Errorf("watchdog given a past deadline, then done: exit %d, stderr %q; want exit %d without a kill", code, &stderr, exitOK)
	}

	// Without "done", the past deadline kills (here: reports a kill of
	// nothing) once the supervisor's input ends.
	stderr.Reset()
	code = watchdogMain(strings.NewReader("deadline 1\npgid 0\n"), io.Discard, &stderr)
	if code != exitOK || !strings.Contains(stderr.String(), "killed the command's process group") {
		t.Errorf("watchdog given a past deadline and no done: exit %d, stderr %q; want the kill reported", code, &stderr)
	}
}

// TestWatchdogArmSendsOnlyMoves: the kill time, worked out afresh from what
// is left of the term at each look, moves by the time between two clock
// readings; only a move of a millisecond or more (an extension) is sent.
func TestWatchdogArmSendsOnlyMoves(t *testing.T) {
	r, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := &watchdog{in: in, timeout: time.Second}
	t0 := time.Now().Add(time.Minute)
	w.arm(t0)
	w.arm(t0.Add(300 * time.Microsecond))
	w.arm(t0.Add(-300 * time.Microsecond))
	w.arm(t0.Add(30 * time.Second))
	in.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "deadline "); n != 2 || w.err != nil {
		t.Errorf("sent %q (err %v); want the first deadline and the extension's, nothing for moves under a millisecond", out, w.err)
	}
	if !w.last.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("last kill time sent %v, want %v", w.last, t0.Add(30*time.Second))
	}
}

// watchdogFaultEnv, in a test's environment, has the watchdogs this test
// binary runs (for runs in-process) misbehave: "ACTION FILE", where ACTION is
// "exit" (with status 3, at once) or a duration to sleep before starting.
// Only the first watchdog, which creates FILE, does it.
const watchdogFaultEnv = "LETEST_WATCHDOG_FAULT"

// watchdogReportEnv names a file to which this test binary, run as COMMAND,
// appends what it finds of its supervisor's watchdog (see reportWatchdog).
const watchdogReportEnv = "LETEST_WATCHDOG_REPORT"

// watchdogFault does what watchdogFaultEnv says, in a watchdog process.
func watchdogFault() {
	action, file, ok := strings.Cut(os.Getenv(watchdogFaultEnv), " ")
	if !ok {
		return
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return // not the first watchdog
	}
	f.Close()
	if action == "exit" {
		os.Exit(3)
	}
	d, _ := time.ParseDuration(action)
	time.Sleep(d) // the fault: a watchdog slow to come up
}

// reportWatchdog is COMMAND: it appends a line to file, "armed" if its
// supervisor (its parent) has a watchdog with its timer set, else "unarmed";
// and after "armed", any fd of its own that is one of the watchdog's pipes.
func reportWatchdog(file string) {
	report := "unarmed"
	if wd := armedWatchdog(os.Getppid()); wd != 0 {
		report = "armed"
		pipes := map[string]bool{}
		for _, fd := range []string{"0", "1"} {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", wd, fd)); err == nil && strings.HasPrefix(l, "pipe:") {
				pipes[l] = true
			}
		}
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); pipes[l] {
				report += fmt.Sprintf(", holding the watchdog's %s as fd %s", l, fd.Name())
			}
		}
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(f, report)
	f.Close()
	os.Exit(0)
}

// armedWatchdog returns the pid of the watchdog of the supervisor whose pid
// is given if it runs with its kill timer set, else 0.
func armedWatchdog(supervisor int) int {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		_, rest, _ := strings.Cut(string(stat[bytes.LastIndexByte(stat, ')')+1:]), " ")
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(supervisor) {
			continue
		}
		if cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline")); !bytes.Contains(cmdline, []byte(watchdogCommand)) {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l != "anon_inode:[timerfd]" {
				continue
			}
			info, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "fdinfo", fd.Name()))
			if bytes.Contains(info, []byte("it_value:")) && !bytes.Contains(info, []byte("it_value: (0, 0)")) {
				pid, _ := strconv.Atoi(p.Name())
				return pid
			}
		}
	}
	return 0
}

// TestRunStartsCommandUnderArmedWatchdog: run starts COMMAND only once its
// watchdog has said that its timer is set, and COMMAND inherits none of the
// watchdog's pipes. A supervisor frozen or starved before then would leave
// COMMAND unguarded: in a loaded CI run, COMMAND ran 1.5 s past its term
// because the race-built watchdog was still starting. A watchdog that exits
// first, or is not ready in time, is killed, with a warning, and COMMAND
// waits for the next tenure (and a new watchdog). COMMAND (this binary)
// reports what it finds at its start.
func TestRunStartsCommandUnderArmedWatchdog(t *testing.T) {
	for _, c := range []struct {
		name, fault string
		patience    time.Duration // watchdogPatience, if not 0
		warning     string        // why the first tenure did not run COMMAND
	}{
		// (Slower than this race-built binary takes to start COMMAND.)
		{"slow to start", "2s", 0, ""},
		{"exits before it is ready", "exit", 0,
			"not starting the command: the watchdog process failed: it exited (exit status 3) before setting its timer"},
		// (The sleep outlasts the patience, and ends soon after,
		// should a watchdog be left behind.)
		{"not ready in time", "20s", 5 * time.Second,
			"not starting the command: the watchdog process had not set its timer "},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			report := filepath.Join(dir, "report")
			t.Setenv(watchdogFaultEnv, c.fault+" "+filepath.Join(dir, "faulted"))
			t.Setenv(watchdogReportEnv, report)
			if c.patience != 0 {
				defer func(p time.Duration) { watchdogPatience = p }(watchdogPatience)
				watchdogPatience = c.patience
			}
			var stdout, stderr testenv.SyncBuffer
			done := make(chan outcome, 1)
			go func() {
				done <- dispatch([]string{"run", "--store", "file://" + filepath.Join(dir, "record"),
					testTermFlag, testSkewFlag, testGraceFlag, "--", os.Args[0]}, &stdout, &stderr)
			}()
			var o outcome
			select {
			case o = <-done:
			case <-time.After(2 * patience): // two watchdogs started, one waited out
				t.Fatalf("run did not exit within %v\n%s", 2*patience, &stderr)
			}
			got, err := os.ReadFile(report)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if o.code != 0 || o.signal != 0 || string(got) != "armed\n" {
				t.Errorf("exit %+v, COMMAND reported %q; want exit 0 and one COMMAND, started under an armed watchdog (\"armed\\n\")\n%s", o, got, &stderr)
			}
			if c.warning != "" && !strings.Contains(stderr.String(), c.warning) {
				t.Errorf("log lacks %q:\n%s", c.warning, &stderr)
			}
			if c.warning == "" && strings.Contains(stderr.String(), "not starting the command") {
				t.Errorf("log says a command was not started:\n%s", &stderr)
			}
		})
	}
}
