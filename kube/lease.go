package kube

import (
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/racedecider/leaderelection/entry"
)

// RecordAnnotation is the annotation on the Lease that holds this library's
// election record, in the text form entry.Marshal writes (a header line and
// a JSON body). The Lease's spec carries the same facts in the form
// client-go and kubectl read.
const RecordAnnotation = "leaderelection.racedecider.io/record"

// setRecord makes l carry e (encoded as data): the annotation, and a spec
// that tells the same story to kubectl and client-go electors.
//
// renewTime + leaseDurationSeconds = e.TermExpiry (to the microsecond):
// leaseDurationSeconds is the time left in the term when the write is sent,
// rounded up to whole seconds (and more for writes less than a second apart:
// see distinctForClientGo), and renewTime is TermExpiry minus that, so as a
// rule at most a second before the write. A client-go elector judges a Lease
// expired leaseDurationSeconds after it observed it change, on its own
// clock; since it observes the write after it is sent, that is never before
// TermExpiry.
//
// The time left is counted on this host's clock (now is WriteEntry's
// time.Now), not on the engine's (Config.Clock), which the backend does not
// see: the record carries the term's expiry but neither when the write was
// sent nor the term's length, so only the sum of renewTime and
// leaseDurationSeconds follows from it, not how it splits. client-go's count
// then ends no earlier than TermExpiry on the host's clock, and the
// guarantee above holds whenever the engine's clock reads no earlier than
// the host's (the real clock, or one ahead of it, whose leader stops before
// the host's clock reaches TermExpiry); an engine clock behind the host's by
// X shortens what client-go waits, next to the term, by up to X. (A fake
// engine clock says nothing of real time, in which client-go counts.)
//
// And the spec can be recomputed from the record, which is how toEntry
// notices a spec written by someone else (a client-go elector, which keeps
// annotations it does not know).
//
// prev is the Lease replaced (nil for a create); acquireTime and
// leaseTransitions continue from it.
func setRecord(l *coordinationv1.Lease, e *entry.RaceEntry, data []byte, prev *coordinationv1.Lease, now time.Time) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[RecordAnnotation] = string(data)

	holder := e.LeaderID
	if e.Released {
		holder = ""
	}
	dur := leaseSeconds(e.TermExpiry.Sub(now))

	var prevHolder string
	var transitions int32
	if prev != nil {
		if prev.Spec.HolderIdentity != nil {
			prevHolder = *prev.Spec.HolderIdentity
		}
		if prev.Spec.LeaseTransitions != nil {
			transitions = *prev.Spec.LeaseTransitions
		}
		dur = distinctForClientGo(prev, holder, prevHolder, e.TermExpiry, dur)
	}
	renew := renewTime(e.TermExpiry, dur)
	acquire := renew
	if prev != nil {
		// An extension keeps the tenure's acquireTime; so does a release,
		// which ends the tenure without beginning another.
		if e.Term != e.ElectionNumber && prev.Spec.AcquireTime != nil {
			acquire = *prev.Spec.AcquireTime
		}
	}
	// Like client-go, count a transition each time the holder changes to
	// a non-empty identity other than the previous one.
	if holder != "" && holder != prevHolder && prev != nil && transitions < math.MaxInt32 {
		transitions++
	}
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &dur
	l.Spec.RenewTime = &renew
	l.Spec.AcquireTime = &acquire
	l.Spec.LeaseTransitions = &transitions
	// The coordinated leader election fields belong to the Kubernetes
	// control plane's own scheme, which this library takes no part in.
	l.Spec.Strategy, l.Spec.PreferredHolder = nil, nil
}

// distinctForClientGo returns the leaseDurationSeconds for a write of
// holder's term ending at expiry over prev, at least dur, such that a
// client-go elector sees the write as a change. client-go restarts its
// countdown only when the record it reads changes, and it reads renewTime in
// whole seconds: two writes less than a second apart (a TermLength under 2
// s; a slow store, which brings extensions forward) could look the same to
// it, and it would count down from the first, to before the second's
// expiry. renewTime is expiry less leaseDurationSeconds, so such writes are
// those whose expiries fall in the same second with the same duration: each
// such write lasts a second longer than the one before it, to client-go (a
// longer wait for its candidates, never a shorter one).
func distinctForClientGo(prev *coordinationv1.Lease, holder, prevHolder string, expiry time.Time, dur int32) int32 {
	s := prev.Spec
	prevExpiry, ok := specExpiry(s)
	if holder != prevHolder || !ok || prevExpiry.Unix() != expiry.Unix() ||
		dur > *s.LeaseDurationSeconds || *s.LeaseDurationSeconds == math.MaxInt32 {
		return dur
	}
	return *s.LeaseDurationSeconds + 1
}

// specExpiry is when s says its holder's lease ends, renewTime +
// leaseDurationSeconds; ok is false if it says neither.
func specExpiry(s coordinationv1.LeaseSpec) (expiry time.Time, ok bool) {
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	return s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second), true
}

// leaseSeconds rounds d up to whole seconds, within what the Lease's int32
// field holds and its validation requires (at least 1).
func leaseSeconds(d time.Duration) int32 {
	s := (d + time.Second - 1) / time.Second
	return int32(min(max(s, 1), math.MaxInt32))
}

// renewTime is expiry less dur seconds, at the microsecond precision the API
// server stores.
func renewTime(expiry time.Time, dur int32) metav1.MicroTime {
	return metav1.NewMicroTime(expiry.Add(-time.Duration(dur) * time.Second).Truncate(time.Microsecond))
}

// toEntry returns the election record l holds.
//
// A Lease whose spec is not the one our record implies was last written by
// someone else, normally a client-go elector during a migration (it keeps
// our annotation but rewrites the spec). Its record is made from the spec:
// held by holderIdentity until renewTime + leaseDurationSeconds, so that the
// engine waits for that plus MaxClockSkew before taking over, as it would
// for one of its own. Its ElectionNumber and Term are above those of any
// record of ours the Lease still carries, and rise with each client-go
// tenure (see foreignEntry), so fencing tokens keep rising across the
// migration. A spec that names a holder but not until when it holds the
// Lease (no renewTime or leaseDurationSeconds) is no record to take over:
// an error wrapping entry.ErrCorruptRecord.
func (d *Decider) toEntry(l *coordinationv1.Lease) (*entry.RaceEntry, error) {
	raw, ours := l.Annotations[RecordAnnotation]
	var rec *entry.RaceEntry
	if ours {
		var err error
		rec, err = entry.Unmarshal([]byte(raw))
		if err != nil {
			return nil, fmt.Errorf("kube: %s (resourceVersion %s), annotation %s: %w", d.name, l.ResourceVersion, RecordAnnotation, err)
		}
		if specMatches(l, rec) {
			rec.Token = token(l)
			return rec, nil
		}
	}
	if s := l.Spec; s.HolderIdentity != nil && *s.HolderIdentity != "" {
		if _, ok := specExpiry(s); !ok {
			// Made by hand or by a tool that is not client-go (which
			// always writes both): held, but no one can tell until when.
			return nil, fmt.Errorf("kube: %s (resourceVersion %s): %w: held by %q with no renewTime or no leaseDurationSeconds, which says no end to the lease; clear holderIdentity or delete the Lease to hand it to this election",
				d.name, l.ResourceVersion, entry.ErrCorruptRecord, *s.HolderIdentity)
		}
	}
	return foreignEntry(l, rec), nil
}

// specMatches reports whether l's spec is the one setRecord wrote for rec.
func specMatches(l *coordinationv1.Lease, rec *entry.RaceEntry) bool {
	s := l.Spec
	if s.HolderIdentity == nil || s.LeaseDurationSeconds == nil || s.RenewTime == nil {
		return false
	}
	holder := rec.LeaderID
	if rec.Released {
		holder = ""
	}
	want := renewTime(rec.TermExpiry, *s.LeaseDurationSeconds)
	return *s.HolderIdentity == holder && s.RenewTime.Equal(&want)
}

// foreignEntry makes a record from the spec of a Lease another elector
// wrote. stale is the record of ours the Lease still carries, or nil.
//
// An empty holderIdentity (client-go's ReleaseOnCancel) is not read as a
// release: client-go writes it without waiting for the callback that leads
// to return, so the record counts as held for the leaseDurationSeconds (1)
// written with it.
//
// Nor does a spec written over a term of ours that has not ended end it: our
// leader learns of the write only when its next extension fails, up to half
// a term later, and until then it leads. That is no client-go takeover
// (client-go waits out the leaseDurationSeconds our spec gave it) but
// someone editing the spec (kubectl patch), or a client-go leader that was
// cut off and, back, releases the Lease it lost (ReleaseOnCancel): the
// record counts as held until our term's end at least.
func foreignEntry(l *coordinationv1.Lease, stale *entry.RaceEntry) *entry.RaceEntry {
	s := l.Spec
	e := &entry.RaceEntry{Token: token(l)}
	if s.HolderIdentity != nil {
		e.LeaderID = *s.HolderIdentity
	}
	e.TermExpiry, _ = specExpiry(s)
	if stale != nil && !stale.Released && stale.TermExpiry.After(e.TermExpiry) {
		e.TermExpiry = stale.TermExpiry
	}
	switch {
	case stale != nil:
		e.Term = addCapped(max(stale.ElectionNumber, stale.Term, 0), 1)
	case s.LeaseTransitions != nil:
		e.Term = int64(max(*s.LeaseTransitions, 0))
	}
	// A tenure is numbered from when it began (acquireTime, in Unix
	// microseconds, as the engine numbers a record it creates), so that
	// terms rise from one client-go tenure to the next. Over our stale
	// record (which does not change between client-go tenures) it counts
	// up from one above that record, by the microseconds from its expiry
	// to acquireTime: our numbers may run ahead of the clock, as a tenure
	// begun over a client-go one is numbered above that one's
	// ElectionNumber, which counts to its expiry. With none, it is
	// acquireTime itself, which stays above the Term of a leader of ours
	// whose record is gone (the Lease deleted and made anew by
	// client-go). The ElectionNumber adds
	// the microseconds from acquireTime to the expiry, so that it rises
	// with each renewal (watchers see it extend), and that the next tenure
	// is numbered above the Term of a leader of ours whose annotation was
	// removed, as its term began before that expiry.
	//
	// A record with no holder (client-go's release, which it writes with
	// acquireTime now) is numbered from a second before that: above the
	// tenure it ends, so that the tenure begun over it by a candidate that
	// never saw that one is too (the acquireTime of the tenure is gone),
	// and below a client-go tenure begun at once after it on another host,
	// whose clock may be behind. A tenure under a second long, or a clock
	// a second behind, still numbers out of order: watchers skip the
	// record that does.
	if s.AcquireTime != nil {
		acquired := s.AcquireTime.UnixMicro()
		from := acquired
		if e.LeaderID == "" {
			from -= releaseMargin.Microseconds()
		}
		if stale != nil {
			e.Term = addCapped(e.Term, max(from-stale.TermExpiry.UnixMicro(), 0))
		} else {
			e.Term = max(e.Term, from)
		}
		if e.LeaderID != "" {
			e.ElectionNumber = addCapped(e.Term, max(e.TermExpiry.UnixMicro()-acquired, 0))
		}
	}
	e.ElectionNumber = max(e.ElectionNumber, e.Term)
	return e
}

// addCapped is a + b for b >= 0, or math.MaxInt64 where that would overflow.
// A stale record of ours numbered near the top of int64 (made by hand: the
// codec accepts any non-negative number) would otherwise number the
// client-go tenure over it negative, below every Term seen, and the next
// tenure from there. Capped, the record says it leaves no number above it,
// and the engine refuses to campaign on it, naming the Lease.
func addCapped(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// releaseMargin is how far before its acquireTime a client-go release is
// numbered (see foreignEntry).
const releaseMargin = time.Second
