package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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
