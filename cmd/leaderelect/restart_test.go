package main

import (
	"testing"
	"time"
)

// The wait before campaigning again is drawn from the upper half of the
// backoff, so that processes whose commands exited together spread out.
func TestRestartDelayIsJittered(t *testing.T) {
	for _, b := range []time.Duration{time.Second, time.Minute} {
		seen := map[time.Duration]bool{}
		for range 100 {
			d := restartDelay(b)
			if d < b/2 || d > b {
				t.Fatalf("restartDelay(%v) = %v, want within [%v, %v]", b, d, b/2, b)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Errorf("restartDelay(%v) gave %d distinct waits in 100 draws, want them spread", b, len(seen))
		}
	}
}
