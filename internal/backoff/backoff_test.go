package backoff

import (
	"testing"
	"time"
)

func TestNextDoublesUpToMaxWithinItsHalfStep(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	steps := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for round := range 2 {
		for i, s := range steps {
			s *= time.Millisecond
			if got := b.Next(); got < s/2 || got > s {
				t.Fatalf("round %d, wait %d = %v; want within [%v, %v]", round, i, got, s/2, s)
			}
		}
		b.Reset()
	}
}

func TestNextIsJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 20 {
		b := Backoff{Min: time.Second, Max: time.Second}
		seen[b.Next()] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 first waits of 1 s backoffs were all %v; want them jittered", seen)
	}
}

func TestSpread(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 20 {
		d := Spread(time.Second)
		if d < time.Second/2 || d > time.Second {
			t.Fatalf("Spread(1s) = %v; want within [500ms, 1s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 draws of Spread(1s) were all %v; want them jittered", seen)
	}
}

func TestJitterSourceAndMaxBelowMin(t *testing.T) {
	var asked []time.Duration
	b := Backoff{Min: time.Second, Max: time.Millisecond, Jitter: func(d time.Duration) time.Duration {
		asked = append(asked, d)
		return d / 5
	}}
	for i := range 3 {
		if got, want := b.Next(), 600*time.Millisecond; got != want {
			t.Errorf("wait %d = %v; want %v (the step held at Min, which Max is below)", i, got, want)
		}
	}
	if len(asked) != 3 || asked[0] != 500*time.Millisecond {
		t.Errorf("Jitter asked for %v; want three draws over the 500 ms upper half", asked)
	}
}
