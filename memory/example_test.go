package memory_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/memory"
)

// testFailover is a test of the kind a user writes for their own leader-only
// code: it runs in virtual time (testing/synctest, with Config.Clock left
// nil), so the 15 s failover after a crash takes no real time and its timing
// is exact. Stopping a candidate with DisableRelease set leaves its term held,
// as a crash does.
func testFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		decider := memory.NewDecider()
		type tenure struct {
			leader string
			term   int64 // the fencing token
			at     time.Time
		}
		elected := make(chan tenure, 2)
		start := func(id string) (stop func()) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = leaderelection.Config{
					Decider:        decider,
					LeaderID:       id,
					TermLength:     leaderelection.DefaultTermLength,
					MaxClockSkew:   leaderelection.DefaultMaxClockSkew,
					DisableRelease: true,
					OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
						elected <- tenure{id, tv.Term(), time.Now()}
						<-ctx.Done()
					},
				}.Acquire(ctx)
			}()
			return func() { cancel(); <-done }
		}

		crash := start("worker-1")
		first := <-elected
		stopSecond := start("worker-2")
		defer stopSecond()
		synctest.Wait() // worker-2 is waiting for the record to change

		crashedAt := time.Now()
		crash()
		second := <-elected // virtual time runs until worker-2 takes over
		if second.leader != "worker-2" || second.term <= first.term {
			t.Fatalf("after the crash: %+v, before it: %+v", second, first)
		}
		// The term ran out TermLength after its last extension, at most
		// half a term before the crash, and the successor waited
		// MaxClockSkew more (plus a little jitter).
		took := second.at.Sub(crashedAt)
		limit := leaderelection.DefaultTermLength + 2*leaderelection.DefaultMaxClockSkew
		if took < leaderelection.DefaultTermLength/2 || took > limit {
			t.Fatalf("worker-2 took over %v after the crash, want between %v and %v", took, leaderelection.DefaultTermLength/2, limit)
		}
		t.Logf("worker-2 took over %v after worker-1 crashed", took)
	})
}

// Test leader-only code in virtual time: a memory.Decider shared by
// candidates in one test, and testing/synctest to run the terms, so that a
// failover after a crash, 16 s of the default term and skew, is checked in no
// real time.
func Example_virtualTime() {
	// In a _test.go file:
	//
	//	func TestFailover(t *testing.T) { testFailover(t) }
	_ = testFailover
}
