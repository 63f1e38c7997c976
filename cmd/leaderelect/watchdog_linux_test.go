//go:build linux

package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"
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
	code := watchdogMain(strings.NewReader("deadline 1\npgid 0\ndone\n"), &stderr)
	if code != exitOK || strings.Contains(stderr.String(), "killed") {
		t.Errorf("watchdog given a past deadline, then done: exit %d, stderr %q; want exit %d without a kill", code, &stderr, exitOK)
	}

	// Without "done", the past deadline kills (here: reports a kill of
	// nothing) once the supervisor's input ends.
	stderr.Reset()
	code = watchdogMain(strings.NewReader("deadline 1\npgid 0\n"), &stderr)
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
