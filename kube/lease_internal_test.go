package kube

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/racedecider/leaderelection/entry"
)

// clientGoRaw is the record client-go's LeaseLock reads from l, as the bytes
// a LeaderElector compares to tell whether the Lease changed (and only then
// restarts its countdown of leaseDurationSeconds).
func clientGoRaw(t *testing.T, l *coordinationv1.Lease) []byte {
	t.Helper()
	b, err := json.Marshal(*resourcelock.LeaseSpecToLeaderElectionRecord(&l.Spec))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEveryWriteIsAChangeToClientGo: writes of one tenure less than a second
// apart (TermLength 1 s, extending every half term; or a slow store) each
// look new to a client-go elector, which may have seen any earlier one, and
// each still tells it to wait at least until the term's end.
func TestEveryWriteIsAChangeToClientGo(t *testing.T) {
	const term = time.Second
	start := time.Date(2026, 1, 1, 10, 0, 0, 50_000_000, time.UTC)
	var prev *coordinationv1.Lease
	var raws [][]byte
	for i, at := range []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond, 1200 * time.Millisecond, 2200 * time.Millisecond} {
		sent := start.Add(at)
		e := &entry.RaceEntry{ElectionNumber: int64(10 + i), Term: 10, LeaderID: "ours", TermExpiry: sent.Add(term)}
		l := &coordinationv1.Lease{}
		if prev != nil {
			l = prev.DeepCopy()
		}
		setRecord(l, e, []byte("record"), prev, sent)
		s := l.Spec
		left := e.TermExpiry.Sub(sent)
		if got := s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second); !got.Equal(e.TermExpiry) || time.Duration(*s.LeaseDurationSeconds)*time.Second < left {
			t.Errorf("write %d: renewTime %v + %ds = %v; want the term's end %v, with at least the %v left", i, s.RenewTime.Time, *s.LeaseDurationSeconds, got, e.TermExpiry, left)
		}
		raw := clientGoRaw(t, l)
		for j, r := range raws {
			if bytes.Equal(r, raw) {
				t.Errorf("write %d (sent %v) looks the same as write %d to client-go: %s", i, at, j, raw)
			}
		}
		raws = append(raws, raw)
		prev = l
	}
	// Writes a second or more apart need no more than the time left.
	if d := *prev.Spec.LeaseDurationSeconds; d != 1 {
		t.Errorf("a write a second after the one before: leaseDurationSeconds %d, want 1", d)
	}
}

// TestSpecEditedOverOurTerm: a spec written over a term of ours that has not
// ended (kubectl patch clearing the holder, a cut-off client-go leader
// releasing the Lease it lost) does not end that term: our leader leads
// until its next extension fails. The Lease counts as held until the term's
// end; after a release of ours, or once the term is over, the spec rules.
func TestSpecEditedOverOurTerm(t *testing.T) {
	now := time.Now()
	d := &Decider{name: "k8s://default/x"}
	for _, tc := range []struct {
		name     string
		ours     entry.RaceEntry
		wantOurs bool
	}{
		{"term running", entry.RaceEntry{ElectionNumber: 8, Term: 7, LeaderID: "ours", TermExpiry: now.Add(10 * time.Second)}, true},
		{"released", entry.RaceEntry{ElectionNumber: 8, Term: 7, LeaderID: "ours", TermExpiry: now, Released: true}, false},
		{"term over", entry.RaceEntry{ElectionNumber: 8, Term: 7, LeaderID: "ours", TermExpiry: now.Add(-time.Second)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := entry.Marshal(&tc.ours)
			if err != nil {
				t.Fatal(err)
			}
			l := &coordinationv1.Lease{}
			setRecord(l, &tc.ours, data, nil, now.Add(-time.Second))
			// What client-go's release writes: no holder, for a second.
			holder, dur, renew := "", int32(1), metav1.NewMicroTime(now)
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &dur, &renew
			e, err := d.toEntry(l)
			if err != nil {
				t.Fatal(err)
			}
			want := renew.Add(time.Second)
			if tc.wantOurs {
				want = tc.ours.TermExpiry
			}
			if !e.TermExpiry.Equal(want) || e.Released {
				t.Errorf("record read = expiry %v, released %v; want held until %v", e.TermExpiry, e.Released, want)
			}
		})
	}
}
