//go:build linux || freebsd

package main

import "syscall"

// childProcAttr puts COMMAND in its own process group, and has the kernel
// kill it if leaderelect dies (of SIGKILL, say) before it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
