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
	if os.Getenv(RequireServers) != "" {
		t.Fatal(msg + "; " + RequireServers + " is set, so a missing server is a failure")
	}
	t.Skip(msg)
	return ""
}
