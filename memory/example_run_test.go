package memory_test

import "testing"

// TestExampleVirtualTime runs the test Example_virtualTime shows.
func TestExampleVirtualTime(t *testing.T) { testFailover(t) }
