package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/racedecider/leaderelection/internal/tlsfail"
)

// class is what one answer of the API server means for the election: the
// four classes of the RaceDecider contract, plus a missing Lease for reads.
type class int

const (
	// unknown: the request may or may not have been applied (timeout,
	// reset, 5xx, or anything not recognised).
	unknown class = iota
	// missing: a read found no Lease of that name.
	missing
	// raceLost: the write's condition did not hold; not applied.
	raceLost
	// throttled: the server asked to slow down; not applied.
	throttled
	// refused: the server refused for good; not applied.
	refused
)

// request is the kind of request an answer was given to.
type request int

const (
	reqGet    request = iota // GET of the Lease (and the dry-run create after a 404)
	reqCreate                // POST: the first write
	reqUpdate                // PUT conditioned on resourceVersion
	reqWatch                 // LIST and WATCH of the Lease
)

// classify maps one answer of the API server to a request to its class,
// with a short reason for the error message, which goes on with the answer's
// own message (err's): the reason does not repeat it. It is the only place
// that interprets the API server's status codes and reasons.
//
// Only a Status the API server sent counts as an answer. client-go makes up
// a Status for some failures that never reached the server or whose answer
// was lost; those carry no verdict and are unknown, as are 5xx answers
// (etcd timeouts, 504 from the server's own request timeout): the write may
// have been applied.
func classify(err error, req request) (class, string) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		if why := tlsfail.Why(err); why != "" {
			// No request was sent, and none will be until the
			// kubeconfig or the API server's certificate changes.
			return refused, why
		}
		return unknown, "" // no answer: timeout, reset, refused connection, ...
	}
	st := se.Status()
	code := int(st.Code)
	switch {
	case st.Reason == metav1.StatusReasonConflict || (code == http.StatusConflict && req == reqUpdate):
		if req == reqUpdate {
			return raceLost, "the Lease changed since it was read (409 Conflict)"
		}
		return unknown, "409 Conflict"
	case st.Reason == metav1.StatusReasonAlreadyExists:
		if req == reqCreate {
			return raceLost, "the Lease was created by another writer (409 AlreadyExists)"
		}
		return unknown, "409 AlreadyExists"
	case code == http.StatusNotFound:
		// A 404 names what is missing in its details: the Lease, or the
		// namespace a create was sent to.
		if st.Details != nil && st.Details.Kind == "namespaces" {
			return refused, fmt.Sprintf("the namespace %q does not exist (404)", st.Details.Name)
		}
		switch req {
		case reqGet:
			return missing, ""
		case reqUpdate:
			// The Lease conditioned on was deleted: another writer (or
			// an operator) changed it.
			return raceLost, "the Lease conditioned on was deleted (404 NotFound)"
		}
		return refused, "404 NotFound"
	case code == http.StatusTooManyRequests:
		// Priority and fairness rejected the request before it ran.
		return throttled, "the API server asks to slow down (429 TooManyRequests)"
	case code == http.StatusUnauthorized:
		return refused, "401 Unauthorized: the credentials are missing, wrong or expired"
	case code == http.StatusForbidden:
		// RBAC denial, or a namespace being terminated.
		return refused, "403 Forbidden"
	case code == http.StatusGone:
		return unknown, "410 Gone"
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout:
		// 400 BadRequest, 405 MethodNotAllowed, 422 Invalid, 415, ...: the
		// same request would be refused again.
		return refused, fmt.Sprintf("%d %s", code, st.Reason)
	}
	return unknown, ""
}

// statusCode returns the HTTP status of the API server's answer in err, if
// err holds one (see classify).
func statusCode(err error) (int, bool) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return 0, false
	}
	return int(se.Status().Code), true
}

// sending counts a request about to be sent, and returns its number for
// fail.
func (d *Decider) sending() uint64 { return d.sent.Add(1) }

// firstUnauthorized takes note of a 401 to request number sent, and reports
// whether it counts as the first in a row: it is, or the request was sent
// before the first came.
func (d *Decider) firstUnauthorized(sent uint64) bool {
	for {
		if first := d.unauthorized.Load(); first != 0 {
			return sent <= first
		}
		if d.unauthorized.CompareAndSwap(0, d.sent.Load()) {
			return true
		}
		// Another 401, or an answer that reset the count, came between.
	}
}

// fail wraps err from the request req (numbered sent by sending), for the
// Lease d names, into the error the RaceDecider contract asks for. It is the
// one place that turns classes into the shared sentinels.
func (d *Decider) fail(ctx context.Context, what string, req request, sent uint64, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// client-go does not always wrap the context's error.
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	c, reason := classify(err, req)
	if code, answered := statusCode(err); answered {
		// Credentials that expired are refreshed after a 401 (client-go's
		// exec plugins, a rotated token file): one 401 is retried; a
		// second, to a request sent after the first came, with no other
		// answer between them, is a refusal. (Requests in flight
		// together, a candidate's read and the watch's list, say, all get
		// the first 401.)
		if code != http.StatusUnauthorized {
			d.unauthorized.Store(0)
		} else if d.firstUnauthorized(sent) {
			c, reason = unknown, "401 Unauthorized (retried once, as credentials are refreshed after one)"
		}
	}
	switch c {
	case raceLost:
		return fmt.Errorf("kube: %s %s: %s: %w", what, d.name, reason, errRaceLost)
	case throttled:
		return fmt.Errorf("kube: %s %s: %s: %w: %w", what, d.name, reason, errThrottled, err)
	case refused:
		return fmt.Errorf("kube: %s %s: %s: %w: %w", what, d.name, reason, errRefused, err)
	}
	if reason != "" {
		reason += ": "
	}
	if req == reqCreate || req == reqUpdate {
		// Sent once (see leasesOf), it may have been applied: the
		// engine reads back to find out.
		return fmt.Errorf("kube: %s %s: outcome unknown: %s%w", what, d.name, reason, err)
	}
	return fmt.Errorf("kube: %s %s: %s%w", what, d.name, reason, err)
}
