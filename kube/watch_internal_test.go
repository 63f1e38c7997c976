package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/racedecider/leaderelection/entry"
)

// TestDownWatchVouchesForNothing: while the watch is down, a wait fails
// with an error that does not wrap a context's, even when the watch went
// down on a LIST that timed out: one that did would pass, for a caller
// whose own deadline has passed, for that deadline's error, which vouches
// that nothing changed.
func TestDownWatchVouchesForNothing(t *testing.T) {
	d := &Decider{name: "k8s://default/x"}
	timedOut, cancel := context.WithTimeout(context.Background(), 0)
	cancel()
	listErr := d.fail(timedOut, "list", reqWatch, d.sending(), fmt.Errorf("Get: %w", context.DeadlineExceeded))
	d.w = &watcher{d: d, state: down, err: listErr, since: time.Now(), wake: make(chan struct{}), recent: map[string]bool{}}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	_, err := d.WaitForChange(ctx, entry.LeaderToken{Version: "123"})
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForChange on a watch that is down = %v; want an error that does not wrap the deadline's", err)
	}
}

// TestGoneOnReopeningAfterAGoodRunRelistsAtOnce: a watch that ran well ends
// (the server's timeout), and its reopening is answered 410 Gone (etcd
// compacted the history it resumes from, as TestWatchRelistsOnGone provokes
// on the test server, though there it cannot be made to come at the
// reopening every time). The watcher lists again at once, and waiters go on
// waiting; it used to take the 410 for a failed watch, tell waiters it was
// down (so that the engine polled) and wait a backoff before listing. The
// API server's answers are scripted with client-go's fake clientset, in
// virtual time.
func TestGoneOnReopeningAfterAGoodRunRelistsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		var (
			mu            sync.Mutex
			lists         []time.Time
			watches       []time.Time
			first, stable = watch.NewFake(), watch.NewFake()
		)
		cs.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			lists = append(lists, time.Now())
			return true, &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(10 * len(lists))}}, nil
		})
		cs.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			watches = append(watches, time.Now())
			switch len(watches) {
			case 1:
				// Runs well, then the server ends it.
				time.AfterFunc(3*time.Second, first.Stop)
				return true, first, nil
			case 2:
				return true, nil, apierrors.NewResourceExpired("too old resource version: 10 (20)")
			}
			return true, stable, nil
		})
		d, err := NewDecider(cs, "default", "e")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for range 8 {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			_, err := d.WaitForChange(ctx, entry.LeaderToken{})
			cancel()
			if err != nil && strings.Contains(err.Error(), "down") {
				t.Fatalf("a waiter was told %v; want it to wait while the watch lists again", err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(watches) < 3 || len(lists) < 2 {
			t.Fatalf("%d watches and %d lists in 8 s; want a good watch, a reopening answered 410, a list and a watch", len(watches), len(lists))
		}
		if gap := lists[1].Sub(watches[1]); gap != 0 {
			t.Errorf("listed again %v after the 410; want at once", gap)
		}
	})
}
