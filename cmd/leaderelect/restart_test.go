package main

import (
	"testing"
	"time"
)

// The waits before campaigning again are the ones the usage text and the
// README give (0.5 to 1 s, doubling up to a minute), jittered so that
// processes whose commands exited together spread out.
func TestRestartWaitsAsDocumented(t *testing.T) {
	firsts := map[time.Duration]bool{}
	for range 100 {
		b := restartBackoff
		for i := range 8 {
			step := min(time.Second<<i, time.Minute)
			d := b.Next()
			if d < step/2 || d > step {
				t.Fatalf("wait %d before campaigning again = %v, want within [%v, %v]", i+1, d, step/2, step)
			}
			if i == 0 {
				firsts[d] = true
			}
		}
	}
	if len(firsts) < 50 {
		t.Errorf("100 first waits took %d distinct values, want them spread", len(firsts))
	}
}
