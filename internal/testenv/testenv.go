// Package testenv decides what a test that needs an external server does when
// the server is not there: skip with a message naming the server and how to
// start it, or, under LEADERELECTION_REQUIRE_SERVERS (set by .ci/run), fail.
//
// Every module of the repository may import it: Go's internal rule is by
// import path, not by module.
package testenv

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// RequireServers is the variable that turns a missing server into a failure.
const RequireServers = "LEADERELECTION_REQUIRE_SERVERS"

// Server returns the value of envVar, which the server's start script prints.
// When it is empty the test is skipped with a message naming server and the
// command that starts it, or fails if RequireServers is set.
func Server(t testing.TB, envVar, server, start string) string {
	t.Helper()
	if v := os.Getenv(envVar); v != "" {
		return v
	}
	msg := fmt.Sprintf("%s not running (%s unset): start it with `%s`", server, envVar, start)
	announce(server, msg)
	Missing(t, msg)
	return ""
}

// Missing skips the test for want of what msg names (a server, a facility
// of the machine such as a cgroup controller), or fails it if
// RequireServers is set: CI provides everything its tests need, and a skip
// there would go unnoticed.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(RequireServers) != "" {
		t.Fatal(msg + "; " + RequireServers + " is set, so what a test needs being missing is a failure")
	}
	t.Skip(msg)
}

var announced sync.Map // server name -> struct{}

// announce prints one line per missing server straight to the terminal, if
// there is one: go test shows a passing package's skips only with -v, and a
// user should see that a backend ran without its real server.
func announce(server, msg string) {
	if _, dup := announced.LoadOrStore(server, struct{}{}); dup {
		return
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer tty.Close()
	fmt.Fprintf(tty, "SKIP (%s): %s\n", os.Args[0][strings.LastIndex(os.Args[0], "/")+1:], msg)
}

// SyncBuffer collects what concurrent writers write (a logger, a child
// process's output), for a test to read with String.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
