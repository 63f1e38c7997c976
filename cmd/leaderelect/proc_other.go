//go:build !unix

package main

import (
	"os"
	"syscall"
)

func childProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func reraise(sig syscall.Signal) { os.Exit(128 + int(sig)) }

// notifyBrokenPipe: only Unix has SIGPIPE.
func notifyBrokenPipe() (stop func()) { return func() {} }
