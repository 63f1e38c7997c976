//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/file"
)

// TestRunStopsOnHangupAndQuit: SIGHUP and SIGQUIT stop run as SIGTERM does:
// COMMAND gets SIGTERM (and exits by itself), the term is released, and run
// exits by SIGHUP, or with 131 for SIGQUIT (not Go's goroutine dump). Both
// used to end run at once, COMMAND with it by SIGKILL (its parent-death
// signal), with no grace and the term left held.
func TestRunStopsOnHangupAndQuit(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			store := storeURL(t)
			events := make(chan event, 100)
			p := start(t, events, "A", []string{childEnv + "=wait"},
				"run", "--store", store, "--id", "A", testTermFlag, testSkewFlag, testGraceFlag, "--", os.Args[0])
			c := next(t, events, "START", isLine(startLinePfx, p)).child(t)
			p.signal(t, sig)
			e := next(t, events, "STOP or EOF", func(e event) bool {
				return e.proc == p && (strings.HasPrefix(e.line, stopLinePrefix) || e.line == "EOF")
			})
			if e.line == "EOF" {
				t.Fatalf("after %v, the command (pid %d) was killed without SIGTERM: leaderelect exited %v", sig, c.pid, p.wait(t))
			}
			ps := p.wait(t)
			switch sig {
			case syscall.SIGHUP:
				if got := signalled(ps); got != sig {
					t.Errorf("leaderelect exited with %v after %v, want to be ended by it", ps, sig)
				}
			case syscall.SIGQUIT:
				if ps.ExitCode() != 128+int(syscall.SIGQUIT) || strings.Contains(p.stderr.String(), "goroutine ") {
					t.Errorf("leaderelect exited with %v after SIGQUIT, want status 131 and no goroutine dump", ps)
				}
			}
			if s := status(t, store); !s.Released {
				t.Errorf("record after leaderelect stopped on %v: %+v, want released", sig, s)
			}
		})
	}
}

// TestRunKeepsIgnoredHangupAndInterrupt: a leaderelect run started with
// SIGHUP and SIGINT ignored (nohup, a background job of a script) leaves
// them ignored: they do not stop COMMAND, and a SIGTERM sent after them is
// the one run stops and exits by. run used to catch them again, so that the
// hangup nohup was meant to ignore stopped COMMAND and ended the tenure.
func TestRunKeepsIgnoredHangupAndInterrupt(t *testing.T) {
	wrapper := filepath.Join(t.TempDir(), "nohup")
	script := "#!/bin/sh\ntrap '' HUP INT\nexec " + binary + ` "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	store := storeURL(t)
	events := make(chan event, 100)
	p := startProg(t, events, "A", []string{childEnv + "=wait"}, nil, wrapper,
		"run", "--store", store, "--id", "A", testTermFlag, testSkewFlag, testGraceFlag, "--", os.Args[0])
	next(t, events, "START", isLine(startLinePfx, p))
	// All three in a row: a caught SIGHUP or SIGINT would be the first
	// stop signal, and run would exit by it.
	p.signal(t, syscall.SIGHUP)
	p.signal(t, syscall.SIGINT)
	p.signal(t, syscall.SIGTERM)
	e := next(t, events, "STOP or EOF", func(e event) bool {
		return e.proc == p && (strings.HasPrefix(e.line, stopLinePrefix) || e.line == "EOF")
	})
	if e.line == "EOF" {
		t.Errorf("the command was killed without SIGTERM")
	}
	if ps := p.wait(t); signalled(ps) != syscall.SIGTERM {
		t.Errorf("leaderelect started with SIGHUP and SIGINT ignored, sent SIGHUP, SIGINT, SIGTERM: exited %v, want by SIGTERM", ps)
	}
	if strings.Contains(p.stderr.String(), "hangup") || strings.Contains(p.stderr.String(), "interrupt") {
		t.Errorf("leaderelect acted on an ignored signal:\n%s", p.stderr)
	}
	if s := status(t, store); !s.Released {
		t.Errorf("record after leaderelect stopped: %+v, want released", s)
	}
}

// TestRunSurvivesBrokenStderr: leaderelect run whose stderr is a pipe with
// no reader goes on (its log lines are lost): the Go runtime used to end it
// by SIGPIPE at its first log line.
func TestRunSurvivesBrokenStderr(t *testing.T) {
	store := storeURL(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := exec.Command(binary, "run", "--store", store, "--id", "A", testTermFlag, testSkewFlag, testGraceFlag, "--", os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=wait")
	cmd.Stderr = w
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	line := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("leaderelect exited (%v) before its command printed %s", cmd.ProcessState, what)
			}
			return l
		case <-time.After(patience):
			t.Fatalf("no %s within %v", what, patience)
			return ""
		}
	}
	if l := line(startLinePfx); !strings.HasPrefix(l, startLinePfx) {
		t.Fatalf("the command printed %q, want %s", l, startLinePfx)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if l := line(stopLinePrefix); !strings.HasPrefix(l, stopLinePrefix) {
		t.Fatalf("the command printed %q, want %s", l, stopLinePrefix)
	}
	for range lines {
	}
	_ = cmd.Wait()
	if got := signalled(cmd.ProcessState); got != syscall.SIGTERM {
		t.Errorf("leaderelect exited with %v after SIGTERM, want to be ended by it", cmd.ProcessState)
	}
	if s := status(t, store); !s.Released {
		t.Errorf("record after leaderelect stopped: %+v, want released", s)
	}
}

// TestSignalGroupNeverThePid: signalGroup signals COMMAND's process group,
// and never a process by its pid alone: once COMMAND has been reaped, its
// pid may be another process's. Here pid leads no group (the process is in
// the test's), as a reused pid would.
func TestSignalGroupNeverThePid(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	// SIGKILL, had it been sent, is already pending, and takes the
	// process before this SIGTERM.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if got := signalled(cmd.ProcessState); got != syscall.SIGTERM {
		t.Errorf("the process ended by %v, want SIGTERM: signalGroup signalled a process that leads no group", got)
	}
}

// TestWatchKeepsIgnoredInterrupt: a leaderelect watch started with SIGINT
// ignored (nohup, a background job of a script) leaves it ignored, as run
// does: it installs no handler for it (the kernel's view, in
// /proc/PID/status), and SIGTERM still ends it. watch used to catch SIGINT
// again, so that an interrupt meant for others ended it.
func TestWatchKeepsIgnoredInterrupt(t *testing.T) {
	wrapper := filepath.Join(t.TempDir(), "nohup")
	script := "#!/bin/sh\ntrap '' INT\nexec " + binary + ` "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// A released record, for watch to describe at start.
	path := filepath.Join(t.TempDir(), "record")
	d, err := file.NewDecider(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	err = leaderelection.Config{
		Decider: d, LeaderID: "A", TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond,
		OnElected: func(context.Context, *leaderelection.TimeView) { cancel() },
	}.Acquire(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("electing and releasing: %v", err)
	}
	events := make(chan event, 100)
	p := startProg(t, events, "watch", nil, nil, wrapper, "watch", "--store", "file://"+path, "--poll=100ms")
	// The first line (the record found at start) comes once the signals
	// are set up.
	next(t, events, "watch's first line", func(e event) bool { return e.proc == p })
	ignored, caught := sigMasks(t, p.cmd.Process.Pid)
	if bit := uint64(1) << (syscall.SIGINT - 1); ignored&bit == 0 || caught&bit != 0 {
		t.Errorf("watch started with SIGINT ignored: SigIgn %#x, SigCgt %#x; want SIGINT ignored, not caught", ignored, caught)
	}
	p.signal(t, syscall.SIGTERM)
	if ps := p.wait(t); ps.ExitCode() != 0 {
		t.Errorf("watch exited with %v after SIGTERM, want 0", ps)
	}
}

// sigMasks returns the ignored and caught signal masks of process pid.
func sigMasks(t *testing.T, pid int) (ignored, caught uint64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		switch {
		case k != "SigIgn" && k != "SigCgt":
			continue
		case err != nil:
			t.Fatalf("/proc/%d/status: %q: %v", pid, l, err)
		case k == "SigIgn":
			ignored = n
		default:
			caught = n
		}
	}
	return ignored, caught
}
