//go:build !linux

package main

import (
	"errors"
	"io"
	"time"
)

// Outside Linux, run has no watchdog process: COMMAND is killed at the end
// of the term by the supervisor alone, which must be running to do it.
const watchdogCommand = "__watchdog"

type watchdog struct {
	ready <-chan error
	last  time.Time
	err   error
}

func startWatchdog(time.Time, time.Duration) (*watchdog, error) {
	return nil, errors.New("no watchdog process on this system")
}

func (*watchdog) arm(time.Time) {}
func (*watchdog) setGroup(int)  {}
func (*watchdog) disarm()       {}
func (*watchdog) kill()         {}

func watchdogMain(io.Reader, io.Writer, io.Writer) int { return exitUsage }

// awaitGroupGone cannot tell a live process from a zombie without /proc: the
// group is taken as gone once SIGKILL is sent.
func awaitGroupGone(int, func() bool) bool { return true }
