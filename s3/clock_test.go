package s3_test

import (
	"testing"
	"time"

	"github.com/racedecider/leaderelection/racedecidertest"
)

// TestClockOffsetFromCommitTimes campaigns with clocks set off the store's
// (on this host, so that the true offset is known) and checks that the
// bound from the first write's Date header contains the true offset, to the
// second S3 reports, and warns past MaxClockSkew/4.
func TestClockOffsetFromCommitTimes(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		c := s.client(t, "")
		for _, off := range []time.Duration{-5 * time.Second, 0, 4500 * time.Millisecond} {
			t.Run(off.String(), func(t *testing.T) {
				d, _ := s.decider(t, c)
				got, rtt, warned := racedecidertest.FirstWriteOffset(t, d, off)
				want := -off // the store's clock minus this host's
				t.Logf("offset bound %v, true offset %v", got, want)
				if got.Low > want || got.High < want {
					t.Errorf("offset bound %v does not contain %v", got, want)
				}
				// Whole seconds, perhaps from a cached Date: a second
				// below, two above, plus a round trip.
				if width := got.High - got.Low; width > rtt+3*time.Second+time.Millisecond {
					t.Errorf("offset bound %v is %v wide, want at most the round trip %v + 3 s (+1 ms: the wall and monotonic clocks measure it apart)", got, width, rtt)
				}
				// Past 1 s even after the widening.
				if wantWarn := off != 0; warned != wantWarn {
					t.Errorf("warned %v, want %v", warned, wantWarn)
				}
			})
		}
	})
}
