//go:build linux

package main

import (
	"bytes"
	"strings"
	"testing"
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
