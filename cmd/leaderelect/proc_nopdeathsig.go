//go:build unix && !linux && !freebsd

package main

import "syscall"

// childProcAttr puts COMMAND in its own process group. These systems have no
// parent-death signal: if leaderelect is killed with SIGKILL, COMMAND keeps
// running.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
