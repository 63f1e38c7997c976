package kube_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/kube"
	"github.com/racedecider/leaderelection/racedecidertest"
)

func TestConformance(t *testing.T) {
	cfg := adminConfig(t)
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
		return newDecider(t, cfg, freshLease())
	})
}

func TestDeleted(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	racedecidertest.CheckDeleted(t, newDecider(t, cfg, name), func(t *testing.T) {
		if err := clientset(t, cfg).CoordinationV1().Leases(namespace).Delete(t.Context(), name, deleteOptions()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRaceWriters50 has 50 writers, each with a client (and connection) of
// its own, race on one Lease.
func TestRaceWriters50(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	ds := make([]leaderelection.RaceDecider, 50)
	for i := range ds {
		c := rest.CopyConfig(cfg)
		c.UserAgent = fmt.Sprintf("racewriter-%d", i)
		ds[i] = newDecider(t, c, name)
	}
	racedecidertest.RaceWriters(t, ds, 5)
}

// TestCorruptAnnotation stores foreign and damaged content in the record's
// annotation.
func TestCorruptAnnotation(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	d := newDecider(t, cfg, name)
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) {
		l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
			l.Annotations = map[string]string{kube.RecordAnnotation: string(data)}
			_, err = leases.Create(t.Context(), l, metav1.CreateOptions{})
		} else if err == nil {
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations[kube.RecordAnnotation] = string(data)
			_, err = leases.Update(t.Context(), l, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("storing raw annotation: %v", err)
		}
	}, namespace+"/"+name)
}

// TestMissingNamespace: reads and writes in a namespace that does not exist
// are refusals, never "no election yet".
func TestMissingNamespace(t *testing.T) {
	cfg := adminConfig(t)
	ns := "no-such-ns-" + randomHex(4)
	d, err := kube.NewDeciderForConfig(cfg, ns, "election")
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.ReadCurrent(t.Context())
	if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), ns) {
		t.Errorf("ReadCurrent in a missing namespace = %+v, %v; want entry.ErrRefused naming %s", e, err, ns)
	}
	_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w", TermExpiry: time.Now().Add(time.Minute)})
	if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), ns) {
		t.Errorf("WriteEntry in a missing namespace: %v; want entry.ErrRefused naming %s", err, ns)
	}
}

// TestForbidden uses a user RBAC grants nothing: every request is refused.
func TestForbidden(t *testing.T) {
	cfg := restConfig(t, envKubeconfigNobody)
	d := newDecider(t, cfg, freshLease())
	_, err := d.ReadCurrent(t.Context())
	if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "403") {
		t.Errorf("ReadCurrent without RBAC rights: %v; want entry.ErrRefused (403)", err)
	} else if strings.Count(err.Error(), "forbidden") != 1 {
		t.Errorf("ReadCurrent without RBAC rights: %v; want the server's message once", err)
	}
	_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w", TermExpiry: time.Now().Add(time.Minute)})
	if !errors.Is(err, entry.ErrRefused) {
		t.Errorf("WriteEntry without RBAC rights: %v; want entry.ErrRefused", err)
	}
}

// TestUnauthenticated uses a token the server does not know: a 401, retried
// once, as credentials that expired are refreshed after one (client-go's
// exec plugins, a rotated token file); a second 401 in a row is a refusal.
// A token that works again after one 401 is followed without a refusal.
func TestUnauthenticated(t *testing.T) {
	cfg := rest.CopyConfig(adminConfig(t))
	cfg.BearerToken = "not-a-valid-token"
	d := newDecider(t, cfg, freshLease())
	if _, err := d.ReadCurrent(t.Context()); err == nil || errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "401") {
		t.Errorf("ReadCurrent with an unknown token: %v; want a 401 retried, not a refusal", err)
	}
	if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "401") {
		t.Errorf("ReadCurrent with an unknown token, again: %v; want entry.ErrRefused (401)", err)
	}

	// Credentials that expire, then are refreshed after the 401.
	cfg = rest.CopyConfig(adminConfig(t))
	var expired atomic.Bool
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if expired.Swap(false) {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer expired-token")
			}
			return rt.RoundTrip(r)
		})
	})
	name := freshLease()
	d = newDecider(t, cfg, name)
	for i := range 3 {
		if _, err := d.ReadCurrent(t.Context()); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		expired.Store(true)
		if _, err := d.ReadCurrent(t.Context()); err == nil || errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "401") {
			t.Fatalf("read %d with expired credentials: %v; want a 401 retried, not a refusal", i, err)
		}
	}

	// A waiting candidate on a push store may read nothing for long: its
	// watch's answers count too.
	tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w0", TermExpiry: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	expired.Store(true)
	if _, err := d.ReadCurrent(t.Context()); err == nil || errors.Is(err, entry.ErrRefused) {
		t.Fatalf("read with expired credentials: %v; want a 401 retried, not a refusal", err)
	}
	changed := waitAsync(t, d, tok, "WaitForChange")
	other := newDecider(t, adminConfig(t), name)
	if _, err := other.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "b", WriteID: "w1", TermExpiry: time.Now().Add(time.Minute), Token: tok}); err != nil {
		t.Fatal(err)
	}
	<-changed // the watch listed and watched with refreshed credentials
	expired.Store(true)
	if _, err := d.ReadCurrent(t.Context()); err == nil || errors.Is(err, entry.ErrRefused) {
		t.Errorf("the first 401 after the watch's answers: %v; want it retried, not a refusal", err)
	}
}

// TestUnauthorizedAfterConflict: the GET a write sends after its update is
// answered 409 (to tell a metadata edit from a record written) counts in the
// rule on 401s as every other request does. Credentials that expire right
// after the 409 get a 401 there, the first in a row; the next request's 401
// is the second, a refusal. The GET used to go unaccounted, and the next 401
// was retried as a first.
func TestUnauthorizedAfterConflict(t *testing.T) {
	admin := adminConfig(t)
	cfg := rest.CopyConfig(admin)
	var expired atomic.Bool // from the first 409 on
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if expired.Load() {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer expired-token")
			}
			resp, err := rt.RoundTrip(r)
			if err == nil && r.Method == http.MethodPut && resp.StatusCode == http.StatusConflict {
				expired.Store(true)
			}
			return resp, err
		})
	})
	name := freshLease()
	d := newDecider(t, cfg, name)
	t0 := time.Now()
	first, tok := writeFirst(t, d, t0)
	labelLease(t, admin, name, "labelled")
	ext := &entry.RaceEntry{ElectionNumber: first.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: t0.Add(2 * time.Minute), WriteID: "w2", Token: tok}
	_, err := d.WriteEntry(t.Context(), ext)
	if !expired.Load() {
		t.Fatalf("the extension over a labelled Lease was not answered 409: %v", err)
	}
	if !errors.Is(err, entry.ErrRaceLost) || !strings.Contains(err.Error(), "401") {
		t.Errorf("extension answered 409, its GET then 401: %v; want entry.ErrRaceLost, saying what the GET met", err)
	}
	if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "401") {
		t.Errorf("ReadCurrent after the GET's 401, itself answered 401: %v; want entry.ErrRefused (the second 401 in a row)", err)
	}
}

// TestSpecIsTruthful checks what kubectl and client-go see of our writes.
func TestSpecIsTruthful(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	d := newDecider(t, cfg, name)
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	now := time.Now()
	e := &entry.RaceEntry{ElectionNumber: 0, Term: 0, LeaderID: "leader-a", TermExpiry: now.Add(10 * time.Second), WriteID: "w0"}
	tok, err := d.WriteEntry(t.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	check := func(holder string, transitions int32, expiry time.Time) *coordinationv1.Lease {
		t.Helper()
		l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := l.Spec
		if *s.HolderIdentity != holder || *s.LeaseTransitions != transitions {
			t.Errorf("holderIdentity %q, leaseTransitions %d; want %q, %d", *s.HolderIdentity, *s.LeaseTransitions, holder, transitions)
		}
		end := s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)
		if d := end.Sub(expiry); d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("renewTime %v + leaseDurationSeconds %d = %v; want the term's expiry %v", s.RenewTime, *s.LeaseDurationSeconds, end, expiry)
		}
		if age := time.Since(s.RenewTime.Time); age < 0 || age > 5*time.Second {
			t.Errorf("renewTime %v is not the time of the write (now %v)", s.RenewTime, time.Now())
		}
		return l
	}
	first := check("leader-a", 0, e.TermExpiry)

	// An extension keeps acquireTime.
	e2 := &entry.RaceEntry{ElectionNumber: 1, Term: 0, LeaderID: "leader-a", TermExpiry: time.Now().Add(10 * time.Second), WriteID: "w1", Token: tok}
	if tok, err = d.WriteEntry(t.Context(), e2); err != nil {
		t.Fatal(err)
	}
	l := check("leader-a", 0, e2.TermExpiry)
	if !l.Spec.AcquireTime.Equal(first.Spec.AcquireTime) {
		t.Errorf("extension moved acquireTime from %v to %v", first.Spec.AcquireTime, l.Spec.AcquireTime)
	}
	// A release empties holderIdentity.
	e3 := &entry.RaceEntry{ElectionNumber: 2, Term: 0, LeaderID: "leader-a", TermExpiry: time.Now(), Released: true, WriteID: "w2", Token: tok}
	if tok, err = d.WriteEntry(t.Context(), e3); err != nil {
		t.Fatal(err)
	}
	l, err = leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "" {
		t.Errorf("released Lease has holderIdentity %q", *l.Spec.HolderIdentity)
	}
	// A new holder counts a transition.
	e4 := &entry.RaceEntry{ElectionNumber: 3, Term: 3, LeaderID: "leader-b", TermExpiry: time.Now().Add(10 * time.Second), WriteID: "w3", Token: tok}
	if _, err = d.WriteEntry(t.Context(), e4); err != nil {
		t.Fatal(err)
	}
	check("leader-b", 1, e4.TermExpiry)
	got, err := d.ReadCurrent(t.Context())
	if err != nil || got.WriteID != "w3" {
		t.Fatalf("ReadCurrent = %+v, %v; want our record w3", got, err)
	}
}

// TestForeignLease reads Leases written by client-go electors: without our
// annotation, and with a stale one client-go kept while taking over.
func TestForeignLease(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	d := newDecider(t, cfg, name)
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	renew := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	holder, dur, transitions := "client-go-x", int32(15), int32(4)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur,
			RenewTime: &renew, AcquireTime: &renew, LeaseTransitions: &transitions},
	}
	if _, err := leases.Create(t.Context(), l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err := d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Numbered from acquireTime, in Unix microseconds, plus those to the
	// expiry for the election.
	if e.LeaderID != holder || !e.TermExpiry.Equal(renew.Add(15*time.Second)) || e.Released ||
		e.Term != renew.UnixMicro() || e.ElectionNumber != e.Term+15_000_000 {
		t.Fatalf("client-go Lease read as %+v; want held by %s until renewTime+15s, term %d, election 15 s more", e, holder, renew.UnixMicro())
	}

	// We take over (as if it expired), then client-go takes it back,
	// keeping our annotation.
	n := e.ElectionNumber + 1
	mine := &entry.RaceEntry{ElectionNumber: n, Term: n, LeaderID: "ours", TermExpiry: time.Now().Add(time.Minute), WriteID: "w5", Token: e.Token}
	if _, err := d.WriteEntry(t.Context(), mine); err != nil {
		t.Fatal(err)
	}
	l, err = leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renew = metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &holder, &renew, &renew
	l.Spec.LeaseDurationSeconds = &dur
	if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err = d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if e.LeaderID != holder || e.WriteID != "" || e.ElectionNumber <= mine.ElectionNumber || e.Term <= mine.Term {
		t.Fatalf("client-go takeover over our stale annotation read as %+v; want held by %s with election and term above %d", e, holder, n)
	}
}

// TestLeaseHeldWithNoEnd: a Lease made by hand that names a holder but not
// until when it holds (no renewTime or no leaseDurationSeconds) is no record
// to take over: reading it is an error naming the Lease, and Acquire ends
// with it. Without a holder, it is free.
func TestLeaseHeldWithNoEnd(t *testing.T) {
	cfg := adminConfig(t)
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	holder, none, dur := "by-hand", "", int32(15)
	renew := metav1.NewMicroTime(time.Now())
	for _, c := range []struct {
		name    string
		spec    coordinationv1.LeaseSpec
		corrupt bool
	}{
		{"holder only", coordinationv1.LeaseSpec{HolderIdentity: &holder}, true},
		{"no renewTime", coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, AcquireTime: &renew}, true},
		{"no leaseDurationSeconds", coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renew}, true},
		{"empty", coordinationv1.LeaseSpec{}, false},
		{"empty holder", coordinationv1.LeaseSpec{HolderIdentity: &none}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := freshLease()
			d := newDecider(t, cfg, name)
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: c.spec}
			if _, err := leases.Create(t.Context(), l, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			e, err := d.ReadCurrent(t.Context())
			if !c.corrupt {
				if err != nil || e.LeaderID != "" || !e.TermExpiry.IsZero() {
					t.Fatalf("ReadCurrent = %+v, %v; want a free record", e, err)
				}
				return
			}
			if !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(err.Error(), namespace+"/"+name) {
				t.Fatalf("ReadCurrent = %+v, %v; want an error wrapping entry.ErrCorruptRecord naming %s/%s", e, err, namespace, name)
			}
			t.Logf("%v", err)
			cfg := leaderelection.Config{Decider: d, LeaderID: "ours", TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond,
				OnElected: func(context.Context, *leaderelection.TimeView) { t.Error("elected over a Lease held with no end") }}
			if err := cfg.Acquire(t.Context()); !errors.Is(err, entry.ErrCorruptRecord) {
				t.Fatalf("Acquire = %v, want an error wrapping entry.ErrCorruptRecord", err)
			}
		})
	}
}

// TestClientGoOverRecordAtTheTop: a client-go elector's spec over a record
// of ours numbered at the top of int64 (made by hand: the codec takes any
// non-negative number) reads as numbered no lower than that record, not
// wrapped round to a negative term; and Acquire ends on it, naming the
// Lease, rather than begin a tenure numbered below the terms before it.
func TestClientGoOverRecordAtTheTop(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	d := newDecider(t, cfg, name)
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	stale := &entry.RaceEntry{ElectionNumber: math.MaxInt64, Term: math.MaxInt64 - 5, LeaderID: "ours",
		TermExpiry: time.Now().Add(-time.Hour), Released: true}
	data, err := entry.Marshal(stale)
	if err != nil {
		t.Fatal(err)
	}
	acquired := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	holder, dur, transitions := "client-go-x", int32(15), int32(4)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{kube.RecordAnnotation: string(data)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur,
			RenewTime: &acquired, AcquireTime: &acquired, LeaseTransitions: &transitions},
	}
	if _, err := leases.Create(t.Context(), l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err := d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if e.LeaderID != holder || e.Term < stale.Term || e.ElectionNumber < stale.ElectionNumber {
		t.Fatalf("client-go Lease over our record numbered election %d, term %d read as held by %q, election %d, term %d; want held by %s, numbered no lower",
			stale.ElectionNumber, stale.Term, e.LeaderID, e.ElectionNumber, e.Term, holder)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	acfg := leaderelection.Config{Decider: d, LeaderID: "ours", TermLength: time.Second, MaxClockSkew: 100 * time.Millisecond,
		OnElected: func(_ context.Context, tv *leaderelection.TimeView) { t.Errorf("elected with term %d", tv.Term()) }}
	if err := acfg.Acquire(ctx); !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(err.Error(), namespace+"/"+name) {
		t.Fatalf("Acquire = %v; want an error wrapping entry.ErrCorruptRecord naming %s/%s", err, namespace, name)
	}
}

// TestMetadataChangeIsNoLostRace: a change of the Lease's metadata alone
// (kubectl label, say) leaves the record a write was conditioned on in
// place: the write lands, keeping the label, rather than lose a race that
// nobody ran (which ends a leader's tenure). A write of a record between
// them still loses.
func TestMetadataChangeIsNoLostRace(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	d := newDecider(t, cfg, name)
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	label := func(k string) { t.Helper(); labelLease(t, cfg, name, k) }
	t0 := time.Now()
	first, tok := writeFirst(t, d, t0)
	label("labelled")
	ext := &entry.RaceEntry{ElectionNumber: first.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: t0.Add(2 * time.Minute), WriteID: "w2", Token: tok}
	tok2, err := d.WriteEntry(t.Context(), ext)
	if err != nil {
		t.Fatalf("extension over a Lease whose labels alone changed: %v; want it written", err)
	}
	l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if e.WriteID != "w2" || !e.Token.SameVersion(tok2) || l.Labels["labelled"] != "yes" {
		t.Fatalf("after the extension: record %+v, labels %v; want write w2 at %s, the label kept", e, l.Labels, tok2.Version)
	}

	// Another writer's record, then a label: the record conditioned on
	// is gone.
	other := newDecider(t, cfg, name)
	taken := &entry.RaceEntry{ElectionNumber: ext.ElectionNumber + 1, Term: ext.ElectionNumber + 1, LeaderID: "other", TermExpiry: t0.Add(3 * time.Minute), WriteID: "w3", Token: tok2}
	if _, err := other.WriteEntry(t.Context(), taken); err != nil {
		t.Fatal(err)
	}
	label("again")
	late := &entry.RaceEntry{ElectionNumber: ext.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: t0.Add(3 * time.Minute), WriteID: "w4", Token: tok2}
	if _, err := d.WriteEntry(t.Context(), late); !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("write over a record another writer replaced: %v; want entry.ErrRaceLost", err)
	}
	if e, err := d.ReadCurrent(t.Context()); err != nil || e.WriteID != "w3" {
		t.Fatalf("record %+v, %v; want the other writer's w3", e, err)
	}
}

// TestMetadataChangeWithReadBetween: a leader's extension is conditioned on
// its own last write even when a read on the same Decider (a Watch beside
// the candidate) has since found the Lease with its metadata edited: the
// write lands, where it fetched the Lease, found another resourceVersion and
// lost a race nobody ran.
func TestMetadataChangeWithReadBetween(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	d := newDecider(t, cfg, name)
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	t0 := time.Now()
	first, tok := writeFirst(t, d, t0)
	l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Labels = map[string]string{"labelled": "yes"}
	if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, err := d.ReadCurrent(t.Context()); err != nil || e.WriteID != "w1" || e.Token.SameVersion(tok) {
		t.Fatalf("read after the label: %+v, %v; want w1 at a new resourceVersion", e, err)
	}
	ext := &entry.RaceEntry{ElectionNumber: first.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: t0.Add(2 * time.Minute), WriteID: "w2", Token: tok}
	if _, err := d.WriteEntry(t.Context(), ext); err != nil {
		t.Fatalf("extension conditioned on our last write, its labels edited since and read: %v; want it written", err)
	}
}

// TestRecreatedLeaseIsAnotherRecord: a Lease deleted and created again with
// the same annotation and spec (restored from a manifest or a backup, say) is
// not the Lease a write was conditioned on, whose deletion was a change: the
// write loses, whether the Decider kept the Lease conditioned on (its update
// is answered 409, and a GET finds the new Lease) or fetches it (a GET finds
// the new Lease, and a LIST at the version conditioned on the old one). Both
// used to take the new Lease for the old one with its metadata alone edited,
// and write over it. The new Lease, once read, is written over as any other.
func TestRecreatedLeaseIsAnotherRecord(t *testing.T) {
	cfg := adminConfig(t)
	for _, tc := range []struct {
		name string
		// writer returns the Decider that writes over the token of d's
		// first write, after the Lease was created again.
		writer func(t *testing.T, d *kube.Decider) *kube.Decider
	}{
		{name: "kept", writer: func(_ *testing.T, d *kube.Decider) *kube.Decider { return d }},
		{name: "fetched", writer: func(t *testing.T, d *kube.Decider) *kube.Decider { return newDecider(t, cfg, d.Name()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := freshLease()
			leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
			d := newDecider(t, cfg, name)
			t0 := time.Now()
			first, tok := writeFirst(t, d, t0)
			old, err := leases.Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := leases.Delete(t.Context(), name, deleteOptions()); err != nil {
				t.Fatal(err)
			}
			again, err := leases.Create(t.Context(), &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: old.Labels, Annotations: old.Annotations},
				Spec:       old.Spec,
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}

			ext := &entry.RaceEntry{ElectionNumber: first.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: t0.Add(2 * time.Minute), WriteID: "w2", Token: tok}
			if _, err := tc.writer(t, d).WriteEntry(t.Context(), ext); !errors.Is(err, entry.ErrRaceLost) {
				t.Errorf("write conditioned on the Lease before it was deleted, over one created again with the same record: %v; want entry.ErrRaceLost", err)
			} else {
				t.Logf("%v", err)
			}
			e, err := d.ReadCurrent(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if e.WriteID != "w1" || e.Token.Version != again.ResourceVersion {
				t.Fatalf("record %+v; want w1 at the new Lease's resourceVersion %s, not written over", e, again.ResourceVersion)
			}
			ext.Token = e.Token
			if _, err := d.WriteEntry(t.Context(), ext); err != nil {
				t.Fatalf("write conditioned on the new Lease, read: %v", err)
			}
		})
	}
}

// labelLease sets the label k (to "yes") on the Lease name, as kubectl label
// would: a change of its metadata alone.
func labelLease(t *testing.T, cfg *rest.Config, name, k string) {
	t.Helper()
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[k] = "yes"
	if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestMetadataChangeOverTokenNotKept: a write conditioned on a version that
// the Decider no longer has (another Decider's token, or one its own read
// moved past) fetches the Lease first. Finding it at another resourceVersion
// with its metadata alone edited, the write lands, keeping the labels,
// rather than lose a race nobody ran (which ends a leader's tenure: one
// whose ambiguous write was resolved by a read, say, and a Watch on the same
// Decider read the Lease after a label). A record written between still
// loses.
func TestMetadataChangeOverTokenNotKept(t *testing.T) {
	cfg := adminConfig(t)
	name := freshLease()
	leases := clientset(t, cfg).CoordinationV1().Leases(namespace)
	t0 := time.Now()
	first, tok := writeFirst(t, newDecider(t, cfg, name), t0)
	check := func(what string, tok entry.LeaderToken, writeID string, labels ...string) {
		t.Helper()
		l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := newDecider(t, cfg, name).ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if e.WriteID != writeID || !e.Token.SameVersion(tok) {
			t.Fatalf("after %s: record %+v; want write %s at %s", what, e, writeID, tok.Version)
		}
		for _, k := range labels {
			if l.Labels[k] != "yes" {
				t.Fatalf("after %s: labels %v; want %s kept", what, l.Labels, k)
			}
		}
	}

	// Another Decider's token, the Lease labelled since.
	labelLease(t, cfg, name, "a")
	d := newDecider(t, cfg, name)
	ext := &entry.RaceEntry{ElectionNumber: first.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: t0.Add(2 * time.Minute), WriteID: "w2", Token: tok}
	tok2, err := d.WriteEntry(t.Context(), ext)
	if err != nil {
		t.Fatalf("write conditioned on another Decider's token, the Lease labelled since: %v; want it written", err)
	}
	check("the write over another Decider's token", tok2, "w2", "a")

	// A token the Decider read, then a label, and a read of its own
	// that moved past the token.
	r := newDecider(t, cfg, name)
	if e, err := r.ReadCurrent(t.Context()); err != nil || !e.Token.SameVersion(tok2) {
		t.Fatalf("read = %+v, %v; want w2 at %s", e, err, tok2.Version)
	}
	labelLease(t, cfg, name, "b")
	if e, err := r.ReadCurrent(t.Context()); err != nil || e.WriteID != "w2" || e.Token.SameVersion(tok2) {
		t.Fatalf("read after the label = %+v, %v; want w2 at a new resourceVersion", e, err)
	}
	ext2 := &entry.RaceEntry{ElectionNumber: ext.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: t0.Add(3 * time.Minute), WriteID: "w3", Token: tok2}
	tok3, err := r.WriteEntry(t.Context(), ext2)
	if err != nil {
		t.Fatalf("write conditioned on a token read, a read since passing it after a label: %v; want it written", err)
	}
	check("the write over a token read and passed", tok3, "w3", "a", "b")

	// Another writer's record, then a label: the record conditioned on
	// is gone, and the write loses.
	q := newDecider(t, cfg, name)
	if e, err := q.ReadCurrent(t.Context()); err != nil || !e.Token.SameVersion(tok3) {
		t.Fatalf("read = %+v, %v; want w3 at %s", e, err, tok3.Version)
	}
	taken := &entry.RaceEntry{ElectionNumber: ext2.ElectionNumber + 1, Term: ext2.ElectionNumber + 1, LeaderID: "other", TermExpiry: t0.Add(4 * time.Minute), WriteID: "w4", Token: tok3}
	tok4, err := newDecider(t, cfg, name).WriteEntry(t.Context(), taken)
	if err != nil {
		t.Fatal(err)
	}
	labelLease(t, cfg, name, "c")
	if _, err := q.ReadCurrent(t.Context()); err != nil {
		t.Fatal(err)
	}
	late := &entry.RaceEntry{ElectionNumber: ext2.ElectionNumber + 1, Term: first.Term, LeaderID: "ours", TermExpiry: t0.Add(4 * time.Minute), WriteID: "w5", Token: tok3}
	if _, err := q.WriteEntry(t.Context(), late); !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("write over a record another writer replaced, then labelled: %v; want entry.ErrRaceLost", err)
	} else {
		t.Logf("%v", err)
	}
	l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := q.ReadCurrent(t.Context()); err != nil || e.WriteID != "w4" || l.ResourceVersion == tok4.Version {
		t.Fatalf("record %+v, %v at resourceVersion %s; want the other writer's w4, labelled since", e, err, l.ResourceVersion)
	}
}
