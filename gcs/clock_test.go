package gcs_test

import (
	"testing"
	"time"

	"github.com/racedecider/leaderelection/racedecidertest"
)

// TestClockOffsetFromCommitTimes campaigns with clocks set off the
// emulator's (which stamps objects with its host's clock, this host's) and
// checks that the bound from the first write's "updated" time contains the
// true offset, to the millisecond GCS reports, and warns past MaxClockSkew/4.
func TestClockOffsetFromCommitTimes(t *testing.T) {
	emu := newEmulator(t)
	c := newClient(t, emu.addr)
	for _, off := range []time.Duration{-3 * time.Second, 0, 1500 * time.Millisecond} {
		t.Run(off.String(), func(t *testing.T) {
			got, rtt, warned := racedecidertest.FirstWriteOffset(t, newDecider(t, c, freshObject(t)), off)
			want := -off // the store's clock minus this host's
			t.Logf("offset bound %v, true offset %v", got, want)
			if got.Low > want || got.High < want {
				t.Errorf("offset bound %v does not contain %v", got, want)
			}
			// The write's round trip, plus 3 ms for GCS's precision.
			if width := got.High - got.Low; width > rtt+4*time.Millisecond {
				t.Errorf("offset bound %v is %v wide, want at most the round trip %v + 3 ms (+1 ms: the wall and monotonic clocks measure it apart)", got, width, rtt)
			}
			if wantWarn := off != 0; warned != wantWarn {
				t.Errorf("warned %v, want %v", warned, wantWarn)
			}
		})
	}
}
