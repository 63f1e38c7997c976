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

// TestClientGoTenuresNumbered: records a client-go elector wrote are
// numbered from when its tenure began, so that Terms rise from one client-go
// tenure to the next (with our stale record on the Lease or not) and each
// renewal raises the ElectionNumber, as watchers need to report them; and
// a Lease that lost our record (annotation removed) still numbers the next
// tenure above our last Term.
func TestClientGoTenuresNumbered(t *testing.T) {
	d := &Decider{name: "k8s://default/x"}
	t0 := time.Now()
	ours := &entry.RaceEntry{ElectionNumber: t0.UnixMicro() + 5, Term: t0.UnixMicro() + 3, LeaderID: "ours", TermExpiry: t0, Released: true}
	data, err := entry.Marshal(ours)
	if err != nil {
		t.Fatal(err)
	}
	clientGo := func(annotated bool, holder string, transitions int32, acquired, renewed time.Time) *entry.RaceEntry {
		t.Helper()
		return clientGoLease(t, d, annotated, data, holder, 15, transitions, acquired, renewed)
	}
	for _, annotated := range []bool{true, false} {
		a := clientGo(annotated, "cg-1", 7, t0.Add(time.Second), t0.Add(time.Second))
		renewed := clientGo(annotated, "cg-1", 7, t0.Add(time.Second), t0.Add(3*time.Second))
		b := clientGo(annotated, "cg-2", 8, t0.Add(20*time.Second), t0.Add(20*time.Second))
		if renewed.Term != a.Term || renewed.ElectionNumber <= a.ElectionNumber {
			t.Errorf("annotated %v: a renewal numbered term %d election %d after term %d election %d; want the same term, a higher election",
				annotated, renewed.Term, renewed.ElectionNumber, a.Term, a.ElectionNumber)
		}
		if !b.NewerThan(renewed) || b.Term <= renewed.Term || a.Term <= ours.Term {
			t.Errorf("annotated %v: terms %d (ours), %d (cg-1), %d (cg-2); want them rising", annotated, ours.Term, a.Term, b.Term)
		}
	}

	// Our leader's record, created by its tenure's first write at sent
	// (numbered from then) and extended once: its annotation removed, the
	// spec still ours. TermLength 1.5 s puts acquireTime half a second
	// before that first write.
	sent := time.Now()
	const term = 1500 * time.Millisecond
	first := &entry.RaceEntry{ElectionNumber: sent.UnixMicro(), Term: sent.UnixMicro(), LeaderID: "ours", TermExpiry: sent.Add(term)}
	l := &coordinationv1.Lease{}
	setRecord(l, first, []byte("record"), nil, sent)
	lead := &entry.RaceEntry{ElectionNumber: first.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: sent.Add(term / 2).Add(term)}
	setRecord(l, lead, []byte("record"), l.DeepCopy(), sent.Add(term/2))
	delete(l.Annotations, RecordAnnotation)
	e, err := d.toEntry(l)
	if err != nil {
		t.Fatal(err)
	}
	if e.ElectionNumber+1 <= lead.Term {
		t.Errorf("without our annotation, the next tenure would be numbered %d, not above our leader's term %d", e.ElectionNumber+1, lead.Term)
	}
}

// TestClientGoReleaseThenSuccessor: client-go releases with no holder and
// acquireTime now (over our stale record or not), and another client-go
// elector takes over at once, its clock a little behind: the successor's
// record is newer than the release, and its Term above the released
// tenure's. The release is newer than the tenure it ends, and the tenure a
// candidate of ours would begin over it, not having seen that one, is
// numbered above it (it was numbered from our stale record, or from
// leaseTransitions, far below). Our stale record may be numbered ahead of
// the clock (begun over a client-go tenure, above its ElectionNumber): the
// three were all numbered one above it.
func TestClientGoReleaseThenSuccessor(t *testing.T) {
	d := &Decider{name: "k8s://default/x"}
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	old := &entry.RaceEntry{ElectionNumber: t0.Add(-time.Hour).UnixMicro() + 5, Term: t0.Add(-time.Hour).UnixMicro() + 3,
		LeaderID: "ours", TermExpiry: t0.Add(-time.Hour), Released: true}
	ahead := &entry.RaceEntry{ElectionNumber: t0.Add(15 * time.Second).UnixMicro(), Term: t0.Add(15*time.Second).UnixMicro() - 2,
		LeaderID: "ours", TermExpiry: t0.Add(-time.Second), Released: true}
	for _, c := range []struct {
		name  string
		stale *entry.RaceEntry
	}{{"no record of ours", nil}, {"our record of an hour ago", old}, {"our record numbered ahead of the clock", ahead}} {
		var data []byte
		if c.stale != nil {
			var err error
			if data, err = entry.Marshal(c.stale); err != nil {
				t.Fatal(err)
			}
		}
		lease := func(holder string, dur, transitions int32, acquired, renewed time.Time) *entry.RaceEntry {
			t.Helper()
			return clientGoLease(t, d, c.stale != nil, data, holder, dur, transitions, acquired, renewed)
		}
		first := lease("cg-1", 15, 3, t0, t0.Add(10*time.Second))
		released := lease("", 1, 3, t0.Add(10*time.Second), t0.Add(10*time.Second))
		at := t0.Add(10*time.Second - 50*time.Millisecond) // 50 ms later, on a clock 100 ms behind
		next := lease("cg-2", 15, 4, at, at)
		if next.Term <= first.Term || !next.NewerThan(released) {
			t.Errorf("%s: terms %d (cg-1), %d (its release), %d (cg-2); want cg-2's newer than both", c.name, first.Term, released.Term, next.Term)
		}
		if !released.NewerThan(first) || released.ElectionNumber+1 <= first.Term {
			t.Errorf("%s: cg-1's term %d, then its release numbered term %d election %d; want the release newer, and the next tenure (election + 1) above cg-1's term",
				c.name, first.Term, released.Term, released.ElectionNumber)
		}
	}
}

// clientGoLease is the record d reads from a Lease whose spec a client-go
// elector wrote, with our record's annotation (stale) left on it if
// annotated.
func clientGoLease(t *testing.T, d *Decider, annotated bool, stale []byte, holder string, dur, transitions int32, acquired, renewed time.Time) *entry.RaceEntry {
	t.Helper()
	a, r := metav1.NewMicroTime(acquired), metav1.NewMicroTime(renewed)
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur,
		AcquireTime: &a, RenewTime: &r, LeaseTransitions: &transitions}}
	if annotated {
		l.Annotations = map[string]string{RecordAnnotation: string(stale)}
	}
	e, err := d.toEntry(l)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
