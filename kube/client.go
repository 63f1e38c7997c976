package kube

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// leaseAPI is the part of client-go's Lease client the Decider uses.
type leaseAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// leasesOf returns the Lease client for namespace: one whose every request
// is a single attempt when client has a REST client (a real clientset),
// else client-go's own (a fake clientset, which has none).
//
// client-go's typed clients retry a request up to ten times: a GET or a
// watch whose connection failed after a fixed second, and any request the
// server answered 429 or 5xx with Retry-After after that many seconds. The
// engine gives each call half a term and retries with its own capped,
// jittered backoff, so a one-second pause would make every read on a flaky
// network miss its deadline (and on a network that loses one request in a
// few, fail again), and the engine would never get to retry. And a retried
// update whose first attempt was applied is answered 409 Conflict, which
// would read as a lost race.
func leasesOf(client kubernetes.Interface, namespace string) leaseAPI {
	rc := client.CoordinationV1().RESTClient()
	if p, ok := rc.(*rest.RESTClient); rc == nil || (ok && p == nil) {
		return client.CoordinationV1().Leases(namespace)
	}
	return singleAttempt{rc: rc, namespace: namespace}
}

// singleAttempt makes the requests client-go's typed Lease client makes,
// without its retries.
type singleAttempt struct {
	rc        rest.Interface
	namespace string
}

func (s singleAttempt) req(r *rest.Request) *rest.Request {
	return r.UseProtobufAsDefaultIfPreferred(true).Namespace(s.namespace).Resource("leases").MaxRetries(0)
}

func (s singleAttempt) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := s.req(s.rc.Get()).Name(name).VersionedParams(&opts, scheme.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (s singleAttempt) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	err := s.req(s.rc.Get()).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeoutOf(opts)).Do(ctx).Into(out)
	return out, err
}

func (s singleAttempt) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return s.req(s.rc.Get()).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeoutOf(opts)).Watch(ctx)
}

func (s singleAttempt) Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := s.req(s.rc.Post()).VersionedParams(&opts, scheme.ParameterCodec).Body(l).Do(ctx).Into(out)
	return out, err
}

func (s singleAttempt) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := s.req(s.rc.Put()).Name(l.Name).VersionedParams(&opts, scheme.ParameterCodec).Body(l).Do(ctx).Into(out)
	return out, err
}

func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
