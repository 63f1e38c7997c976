//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/internal/testenv"
)

// sample is one line the leaders' commands append to the shared log.
type sample struct {
	id   string
	term int64
	at   time.Time
}

func readSamples(t *testing.T, path string) []sample {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var s []sample
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var x sample
		var ns int64
		if _, err := fmt.Sscan(sc.Text(), &x.id, &x.term, &ns); err != nil {
			continue // a line cut short by SIGKILL
		}
		x.at = time.Unix(0, ns)
		s = append(s, x)
	}
	return s
}

// pollSamples polls the log until ok holds of its samples, failing after
// patience.
func pollSamples(t *testing.T, path, what string, ok func([]sample) bool) []sample {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		s := readSamples(t, path)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the log within %v", what, patience)
		}
		time.Sleep(20 * time.Millisecond) // polling a file: there is nothing to wait on
	}
}

// tenure is the span of one leader's samples under one fencing token.
type tenure struct {
	id          string
	term        int64
	first, last time.Time
}

func tenures(s []sample) []tenure {
	var ts []tenure
	for _, x := range s {
		i := slices.IndexFunc(ts, func(t tenure) bool { return t.id == x.id && t.term == x.term })
		if i < 0 {
			ts = append(ts, tenure{x.id, x.term, x.at, x.at})
			continue
		}
		ts[i].first = minTime(ts[i].first, x.at)
		if x.at.After(ts[i].last) {
			ts[i].last = x.at
		}
	}
	slices.SortFunc(ts, func(a, b tenure) int { return a.first.Compare(b.first) })
	return ts
}

// TestRunPausedSupervisor stops the leading leaderelect run (not its
// command) for several terms. The watchdog must kill the command at the end
// of the term, before the other candidate is elected; the resumed
// supervisor must not run its command again without winning a new election.
func TestRunPausedSupervisor(t *testing.T) {
	testPausedSupervisor(t, true, func(t *testing.T, p *proc) func() {
		p.signal(t, syscall.SIGSTOP)
		return func() { p.signal(t, syscall.SIGCONT) }
	})
}

// TestRunStarvedSupervisor gives the leading leaderelect run (and not its
// command or watchdog) almost no CPU, through a CFS quota, for several
// terms. A starved supervisor still runs, slowly: it takes the record's lock
// for an extension and then holds it for seconds, so that the other
// candidate may be unable to write until the starvation ends (a waiting
// candidate's takeover failed to come within 15 s now and then for this
// reason while the test awaited it during the pause).
func TestRunStarvedSupervisor(t *testing.T) {
	testPausedSupervisor(t, false, func(t *testing.T, p *proc) func() {
		return starve(t, p.cmd.Process.Pid)
	})
}

// starve moves pid into a cgroup allowed 1ms of CPU per second, and returns
// the function that moves it back. It uses the cgroup v2 cpu controller
// where the unified hierarchy has one, and else the v1 cpu controller.
func starve(t *testing.T, pid int) func() {
	t.Helper()
	type hierarchy struct{ root, quotaFile, quota, procs string }
	var h *hierarchy
	for _, c := range []hierarchy{
		{"/sys/fs/cgroup", "cpu.max", "1000 1000000", "cgroup.procs"},
		{"/sys/fs/cgroup/unified", "cpu.max", "1000 1000000", "cgroup.procs"},
		{"/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", "1000", "cgroup.procs"},
	} {
		if c.quotaFile == "cpu.max" {
			ctrl, err := os.ReadFile(filepath.Join(c.root, "cgroup.controllers"))
			if err != nil || !slices.Contains(strings.Fields(string(ctrl)), "cpu") {
				continue
			}
		} else if _, err := os.Stat(filepath.Join(c.root, c.quotaFile)); err != nil {
			continue
		}
		h = &c
		break
	}
	if h == nil {
		testenv.Missing(t, "no cgroup cpu controller to starve a process with (neither cgroup v2 cpu.max nor v1 cpu.cfs_quota_us)")
	}
	dir := filepath.Join(h.root, fmt.Sprintf("leaderelect-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Missing(t, fmt.Sprintf("cannot create a cgroup (needs root): %v", err))
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	if h.quotaFile == "cpu.cfs_quota_us" {
		if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte("1000000"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, h.quotaFile), []byte(h.quota), 0); err != nil {
		t.Fatal(err)
	}
	// Where pid is now, to move it back.
	back := h.root
	if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
			f := strings.SplitN(l, ":", 3)
			if len(f) == 3 && ((h.quotaFile == "cpu.max" && f[0] == "0") || slices.Contains(strings.Split(f[1], ","), "cpu")) {
				back = filepath.Join(h.root, f[2])
			}
		}
	}
	// cgroup.procs moves every thread of the process, and none of its
	// children.
	if err := os.WriteFile(filepath.Join(dir, h.procs), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatalf("moving %d into %s: %v", pid, dir, err)
	}
	t.Logf("pid %d starved in %s (%s %s)", pid, dir, h.quotaFile, h.quota)
	return func() {
		if err := os.WriteFile(filepath.Join(back, h.procs), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Errorf("moving %d back to %s: %v", pid, back, err)
		}
	}
}

// testPausedSupervisor runs two leaderelect run on one record and pauses the
// leader's supervisor with pause for several terms. stopped says that the
// pause stops it outright: its command can only have been stopped by the
// watchdog, and the other candidate must take over during the pause. A
// supervisor that was merely slowed may still stop its command itself, and
// may hold the record's lock through the pause, so that the takeover comes
// only after it.
func testPausedSupervisor(t *testing.T, stopped bool, pause func(*testing.T, *proc) (resume func())) {
	const (
		term     = 2 * time.Second
		skew     = 200 * time.Millisecond
		pauseFor = 5 * time.Second
	)
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "record")
	logPath := filepath.Join(dir, "log")
	script := fmt.Sprintf(`while :; do echo "$LEADER_ID $LEADER_TERM $(date +%%s%%N)" >> %s; sleep 0.05; done`, logPath)
	events := make(chan event, 1000)
	procs := map[string]*proc{}
	for _, id := range []string{"A", "B"} {
		procs[id] = start(t, events, id, nil, "run", "--store", store, "--id", id,
			"--term="+term.String(), "--skew="+skew.String(), "--grace=500ms", "--", "sh", "-c", script)
	}
	go func() {
		for range events { // stdout: nothing to check
		}
	}()
	first := pollSamples(t, logPath, "first sample", func(s []sample) bool { return len(s) > 0 })[0]
	leader, other := procs[first.id], procs[map[string]string{"A": "B", "B": "A"}[first.id]]
	// The pause is of a supervisor whose watchdog runs with its timer set:
	// run starts COMMAND, whose sample this is, only then.

	// The pause begins while the test holds the record's lock, so that
	// the leader is never stopped holding it: every other candidate's
	// write would wait for it to run again (see the file backend in the
	// README).
	lock := holdLock(t, filepath.Join(dir, "record.lock"))
	pausedAt := time.Now()
	resume := pause(t, leader)
	lock.Close() // releases the lock
	resumed := false
	defer func() {
		if !resumed {
			resume()
		}
	}()
	tookOver := func(s []sample) bool {
		return slices.ContainsFunc(s, func(x sample) bool { return x.id == other.name })
	}
	if stopped {
		// The other candidate takes over once the term has ended.
		pollSamples(t, logPath, "sample from "+other.name, tookOver)
		t.Logf("%s took over %v after the pause began", other.name, time.Since(pausedAt))
	}
	time.Sleep(time.Until(pausedAt.Add(pauseFor))) // the fault's length, not a wait for behaviour
	resume()
	resumed = true
	resumedAt := time.Now()
	if !stopped && tookOver(readSamples(t, logPath)) {
		t.Logf("%s took over during the pause", other.name)
	}

	// Let the resumed supervisor find out, then let a term and more pass
	// in which it must not run its command.
	pollSamples(t, logPath, "samples a term after the resume", func(s []sample) bool {
		return len(s) > 0 && s[len(s)-1].at.After(resumedAt.Add(term+skew))
	})
	ts := tenures(readSamples(t, logPath))
	for _, x := range ts {
		t.Logf("  %s token %d: %s to %s", x.id, x.term, x.first.Format(time.StampMilli), x.last.Format(time.StampMilli))
	}
	for i := 1; i < len(ts); i++ {
		prev, cur := ts[i-1], ts[i]
		if !prev.last.Before(cur.first) {
			t.Errorf("%s (token %d) ran until %v, after %s (token %d) began at %v",
				prev.id, prev.term, prev.last.Format(time.StampMicro), cur.id, cur.term, cur.first.Format(time.StampMicro))
		}
		if cur.term <= prev.term {
			t.Errorf("%s ran with token %d after %s's %d: not a new election", cur.id, cur.term, prev.id, prev.term)
		}
	}
	for _, x := range ts {
		if x.id == leader.name && x.term == first.term && x.last.After(pausedAt.Add(term)) {
			t.Errorf("%s's command ran until %v, a term after its supervisor was paused at %v", x.id, x.last, pausedAt)
		}
	}
	if stopped && !strings.Contains(leader.stderr.String(), "watchdog: the term is ending") {
		t.Errorf("%s's log does not show the watchdog killing its command:\n%s", leader.name, leader.stderr)
	}
	for _, p := range procs {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range procs {
		p.wait(t)
	}
}

// holdLock takes an exclusive flock on path, waiting for it.
func holdLock(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	// Closed (the lock released) also when the test ends early: the
	// candidates would otherwise wait on it until they were killed.
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return f
}
