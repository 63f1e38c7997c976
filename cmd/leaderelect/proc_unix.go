//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// signalGroup sends sig to the process group led by pid (COMMAND's, which
// childProcAttr always puts in a group of its own). A group that is gone
// (ESRCH) is left at that: never pid alone, which once COMMAND has been
// reaped may be another process's.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}

// notifyBrokenPipe has SIGPIPE delivered to a channel (and dropped), until
// the function it returns is called. Without it, the Go runtime ends the
// process by SIGPIPE on a write to a broken pipe on stdout or stderr; with
// it, the write fails with EPIPE. (signal.Ignore would do as much, but
// COMMAND would inherit the ignored SIGPIPE.)
func notifyBrokenPipe() (stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGPIPE)
	return func() { signal.Stop(c) }
}

// reraise ends leaderelect by sig, with its default action, so that the
// parent sees it stopped by the signal it was sent.
func reraise(sig syscall.Signal) {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	// Delivery is asynchronous; should it not end the process, exit as a
	// shell would report it.
	time.Sleep(time.Second)
	os.Exit(128 + int(sig))
}
