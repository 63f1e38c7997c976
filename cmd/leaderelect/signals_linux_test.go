//go:build linux

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
