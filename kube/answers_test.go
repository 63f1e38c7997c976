package kube

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/testenv"
)

var leases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// TestClassifyRealAnswers provokes each answer from the real API server and
// checks its class.
func TestClassifyRealAnswers(t *testing.T) {
	path := testenv.Server(t, "LEADERELECTION_KUBECONFIG", "kube-apiserver", `eval "$(scripts/kube-apiserver.sh start)"`)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	name := "classify-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ls := cs.CoordinationV1().Leases("default")

	check := func(what string, err error, req request, want class) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		if got, reason := classify(err, req); got != want {
			t.Errorf("%s: %v classified %v (%s), want %v", what, err, got, reason, want)
		}
	}
	_, err = ls.Get(ctx, name, metav1.GetOptions{})
	check("GET of a missing Lease", err, reqGet, missing)
	created, err := ls.Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ls.Create(ctx, l, metav1.CreateOptions{})
	check("create of an existing Lease", err, reqCreate, raceLost)
	changed := created.DeepCopy()
	changed.Labels = map[string]string{"changed": "yes"} // an update that changes nothing is not a write
	if _, err := ls.Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = ls.Update(ctx, created.DeepCopy(), metav1.UpdateOptions{})
	check("update on a stale resourceVersion", err, reqUpdate, raceLost)
	gone := created.DeepCopy()
	gone.Name = name + "-never-created"
	_, err = ls.Update(ctx, gone, metav1.UpdateOptions{})
	check("update of a missing Lease", err, reqUpdate, raceLost)
	_, err = cs.CoordinationV1().Leases("no-such-namespace").Create(ctx, l, metav1.CreateOptions{})
	check("create in a missing namespace", err, reqCreate, refused)
	bad := l.DeepCopy()
	bad.Name = name + "-invalid"
	negative := int32(-1)
	bad.Spec.LeaseDurationSeconds = &negative
	_, err = ls.Create(ctx, bad, metav1.CreateOptions{})
	check("create of an invalid Lease (422)", err, reqCreate, refused)

	if nobody := os.Getenv("LEADERELECTION_KUBECONFIG_NOBODY"); nobody != "" {
		ncfg, err := clientcmd.BuildConfigFromFlags("", nobody)
		if err != nil {
			t.Fatal(err)
		}
		_, err = kubernetes.NewForConfigOrDie(ncfg).CoordinationV1().Leases("default").Get(ctx, name, metav1.GetOptions{})
		check("GET without RBAC rights (403)", err, reqGet, refused)
	}
	anon := rest.AnonymousClientConfig(cfg)
	_, err = kubernetes.NewForConfigOrDie(anon).CoordinationV1().Leases("default").Get(ctx, name, metav1.GetOptions{})
	check("anonymous GET (401)", err, reqGet, refused)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ls.Get(cctx, name, metav1.GetOptions{})
	check("GET with a cancelled context", err, reqGet, unknown)
}

// TestClassifyServerStatuses covers the answers the test server cannot be
// made to give on demand (throttling, overload, etcd timeouts), built with
// the apimachinery constructors the API server itself uses for them.
func TestClassifyServerStatuses(t *testing.T) {
	cases := []struct {
		name string
		err  error
		req  request
		want class
	}{
		{"429 from priority and fairness", apierrors.NewTooManyRequests("too many requests, please try again later", 1), reqUpdate, throttled},
		{"500 etcd error", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), reqUpdate, unknown},
		{"504 server timeout", apierrors.NewTimeoutError("request did not complete within 60s", 0), reqUpdate, unknown},
		{"503 service unavailable", apierrors.NewServiceUnavailable("etcd is unavailable"), reqCreate, unknown},
		{"409 conflict", apierrors.NewConflict(leases, "x", errors.New("the object has been modified")), reqUpdate, raceLost},
		{"409 already exists", apierrors.NewAlreadyExists(leases, "x"), reqCreate, raceLost},
		{"404 lease on update", apierrors.NewNotFound(leases, "x"), reqUpdate, raceLost},
		{"404 namespace on create", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), reqCreate, refused},
		{"403", apierrors.NewForbidden(leases, "x", errors.New("RBAC: access denied")), reqGet, refused},
		{"401", apierrors.NewUnauthorized("Unauthorized"), reqUpdate, refused},
		{"400", apierrors.NewBadRequest("bad"), reqUpdate, refused},
		{"408 request timeout", &apierrors.StatusError{ErrStatus: metav1.Status{Code: 408, Reason: metav1.StatusReasonTimeout}}, reqUpdate, unknown},
		{"no answer", context.DeadlineExceeded, reqUpdate, unknown},
	}
	for _, c := range cases {
		if got, reason := classify(c.err, c.req); got != c.want {
			t.Errorf("%s: classified %v (%s), want %v", c.name, got, reason, c.want)
		}
	}
	d := &Decider{name: "k8s://ns/x"}
	ctx := context.Background()
	if err := d.fail(ctx, "update", reqUpdate, d.sending(), apierrors.NewTooManyRequests("slow down", 1)); !errors.Is(err, entry.ErrThrottled) {
		t.Errorf("429: %v does not wrap entry.ErrThrottled", err)
	}
	if err := d.fail(ctx, "update", reqUpdate, d.sending(), apierrors.NewConflict(leases, "x", errors.New("modified"))); !errors.Is(err, entry.ErrRaceLost) {
		t.Errorf("409: %v does not wrap entry.ErrRaceLost", err)
	}
	// One 401 is retried (credentials are refreshed after one); a second
	// in a row is a refusal; any other answer starts the count again, but
	// no answer at all does not.
	unauthorized := apierrors.NewUnauthorized("Unauthorized")
	for i, c := range []struct {
		err     error
		refused bool
	}{
		{unauthorized, false},
		{unauthorized, true},
		{unauthorized, true},
		{apierrors.NewConflict(leases, "x", errors.New("modified")), false},
		{unauthorized, false},
		{context.DeadlineExceeded, false},
		{unauthorized, true},
	} {
		if err := d.fail(ctx, "read", reqGet, d.sending(), c.err); errors.Is(err, entry.ErrRefused) != c.refused {
			t.Errorf("answer %d (%v): %v; refused %v, want %v", i, c.err, err, !c.refused, c.refused)
		}
	}
	// Requests in flight together (a candidate's read, the watch's list)
	// all get the first 401: only one sent after it came counts as the
	// second.
	d.fail(ctx, "read", reqGet, d.sending(), apierrors.NewConflict(leases, "x", errors.New("modified")))
	read, list := d.sending(), d.sending()
	if err := d.fail(ctx, "read", reqGet, read, unauthorized); errors.Is(err, entry.ErrRefused) {
		t.Errorf("the first 401: %v; want it retried", err)
	}
	if err := d.fail(ctx, "list", reqWatch, list, unauthorized); errors.Is(err, entry.ErrRefused) {
		t.Errorf("a 401 to a request sent before the first 401 came: %v; want it retried too", err)
	}
	if err := d.fail(ctx, "read", reqGet, d.sending(), unauthorized); !errors.Is(err, entry.ErrRefused) {
		t.Errorf("a 401 to a request sent after the first came: %v; want a refusal", err)
	}
}
