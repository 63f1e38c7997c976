//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// signalGroup sends sig to the process group led by pid (COMMAND's).
func signalGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err == syscall.ESRCH {
		_ = syscall.Kill(pid, sig)
	}
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
