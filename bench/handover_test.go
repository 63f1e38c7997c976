package main

import (
	"testing"
	"time"
)

// A leader that lost its term and won it back before a hand-over (a loaded
// machine, a short term) leaves its second election queued: the hand-over
// returns the successor, where it returned the stopped leader, and the next
// hand-over failed.
func TestHandOverSkipsEarlierElections(t *testing.T) {
	s := &settings{term: 2 * time.Second, skew: 100 * time.Millisecond}
	b, err := newBackend(t.Context(), "memory", s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = withCluster(t.Context(), s, b, func(c *cluster) (struct{}, error) {
		c.startN(2)
		tn, err := c.rec.next(t.Context(), s.patience())
		if err != nil {
			return struct{}{}, err
		}
		c.rec.elected <- &tenure{id: tn.id, term: tn.term, tv: tn.tv, start: time.Now()}
		next, _, err := handOver(t.Context(), s, c, tn)
		if err == nil && next.id == tn.id {
			t.Errorf("the hand-over from %s returned an election of %s from before its stop", tn.id, next.id)
		}
		return struct{}{}, err
	})
	if err != nil {
		t.Fatal(err)
	}
}
