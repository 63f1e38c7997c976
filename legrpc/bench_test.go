package legrpc_test

import (
	"testing"
	"time"

	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// BenchmarkHandover hands leadership over among three servers while a client
// calls in a loop, and reports per handover:
//
//   - reach-ms: from the new leader's election (OnElected called) to the
//     first call it serves;
//   - rejected: calls the Guards rejected (the former leader's and the
//     followers'), which the retry policy retried;
//   - failed: calls that failed as the client saw them.
//
// "release" stops the leader's candidate, which releases; "crash" cuts the
// leader off from the store, so the successor waits for its term (1 s) and
// the skew (100 ms) to pass. Run with -benchtime=20x or so; figures are
// printed, not checked.
func BenchmarkHandover(b *testing.B) {
	for _, mode := range []string{"release", "crash"} {
		b.Run(mode, func(b *testing.B) {
			mem := memory.NewDecider()
			c := newCluster(b, mem, 3)
			cl := startClient(b, newConn(b, watchConfig(mem)))
			leader := c.mon.Next(patience)
			cl.waitServedBy(0, leader.ID)

			var reach time.Duration
			var rejected, failed, handovers int64
			for b.Loop() {
				old := c.proc(leader.ID)
				rejectedBefore, mark := c.rejected(), cl.mark()
				if mode == "release" {
					c.stop(old)
				} else {
					old.store.cut.Store(true)
				}
				next := c.mon.Next(patience)
				cl.waitServedBy(mark, next.ID)
				reach += firstServed(c, next).Sub(next.Start)
				rejected += c.rejected() - rejectedBefore
				for _, r := range cl.snapshot()[mark:] {
					if r.err != nil {
						failed++
					}
				}
				handovers++
				if mode == "release" {
					c.start(old)
				} else {
					old.store.cut.Store(false)
				}
				leader = next
			}
			n := float64(handovers)
			b.ReportMetric(float64(reach.Microseconds())/1000/n, "reach-ms/handover")
			b.ReportMetric(float64(rejected)/n, "rejected/handover")
			b.ReportMetric(float64(failed)/n, "failed/handover")
		})
	}
}

// firstServed returns when tn's server first served a call in tenure tn.
func firstServed(c *cluster, tn *racedecidertest.Tenure) time.Time {
	p := c.proc(tn.ID)
	p.mu.Lock()
	defer p.mu.Unlock()
	var first time.Time
	for _, s := range p.served {
		if s.term == tn.Term && (first.IsZero() || s.at.Before(first)) {
			first = s.at
		}
	}
	return first
}
