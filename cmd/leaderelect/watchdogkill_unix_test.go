//go:build unix

package main

import (
	"syscall"
	"testing"
	"time"
)

// TestKilledByWatchdogAfterUntoldExtension: a supervisor frozen right after
// an extension landed, before it told the watchdog, finds COMMAND killed by
// the watchdog at the old kill time once it runs again. The term, extended,
// has not ended by its clocks; only the kill time last sent to the watchdog
// has passed. That SIGKILL is the watchdog's, and run campaigns again: it
// used to be taken for COMMAND's own death (run exited 137, or with
// --restart ran COMMAND again without a new election, while another
// candidate may have taken over at the old deadline). COMMAND's own exit,
// whatever its status, and a SIGKILL before the watchdog's kill time stay
// COMMAND's own.
func TestKilledByWatchdogAfterUntoldExtension(t *testing.T) {
	// A fake clock: wall-clock readings only (the function compares each
	// time both ways; here both are the wall clock).
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	var (
		sigkill  = syscall.WaitStatus(syscall.SIGKILL) // killed by SIGKILL
		sigterm  = syscall.WaitStatus(syscall.SIGTERM) // killed by SIGTERM
		exit0    = syscall.WaitStatus(0)               // exit(0)
		exit137  = syscall.WaitStatus(137 << 8)        // exit(137): not a signal
		armed    = at(1900 * time.Millisecond)         // the kill time the watchdog holds
		extended = at(2900 * time.Millisecond)         // the term's kill time after the untold extension
	)
	if !sigkill.Signaled() || sigkill.Signal() != syscall.SIGKILL || exit137.Signaled() || exit137.ExitStatus() != 137 {
		t.Fatalf("fake wait statuses do not decode as meant on this system")
	}
	for _, c := range []struct {
		name    string
		ws      syscall.WaitStatus
		now     time.Time
		armed   time.Time
		killBy  time.Time
		overdue bool
		want    bool
	}{
		{"SIGKILL after the untold watchdog kill time, term extended", sigkill, at(2500 * time.Millisecond), armed, extended, false, true},
		{"SIGKILL at the watchdog kill time", sigkill, armed, armed, extended, false, true},
		{"SIGKILL, watchdog overdue at an earlier look", sigkill, at(2500 * time.Millisecond), extended, extended, true, true},
		{"SIGKILL after the term's own kill time", sigkill, at(3 * time.Second), extended, extended, false, true},
		{"SIGKILL without a watchdog, after the term's kill time", sigkill, at(3 * time.Second), time.Time{}, extended, false, true},
		{"SIGKILL before the watchdog's kill time (OOM, kill -9)", sigkill, at(1500 * time.Millisecond), armed, extended, false, false},
		{"SIGKILL without a watchdog, term not over", sigkill, at(2500 * time.Millisecond), time.Time{}, extended, false, false},
		{"own exit 0 after the watchdog's kill time", exit0, at(2500 * time.Millisecond), armed, extended, false, false},
		{"own exit 0 while overdue", exit0, at(2500 * time.Millisecond), extended, extended, true, false},
		{"own exit(137) after the watchdog's kill time", exit137, at(2500 * time.Millisecond), armed, extended, false, false},
		{"SIGTERM from elsewhere after the term's kill time", sigterm, at(3 * time.Second), extended, extended, false, false},
	} {
		if got := killedByWatchdog(c.ws, c.now, c.armed, c.killBy, c.overdue); got != c.want {
			t.Errorf("%s: killedByWatchdog = %v, want %v", c.name, got, c.want)
		}
	}
}
