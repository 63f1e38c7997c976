package memory_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// cuttable is one candidate's access to a shared memory Decider, which the
// test can cut.
type cuttable struct {
	*memory.Decider
	cut atomic.Bool
}

func (c *cuttable) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if c.cut.Load() {
		return nil, context.DeadlineExceeded
	}
	return c.Decider.ReadCurrent(ctx)
}

func (c *cuttable) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	if c.cut.Load() {
		return entry.LeaderToken{}, context.DeadlineExceeded
	}
	return c.Decider.WriteEntry(ctx, e)
}

// TestElection runs the election scenario in virtual time.
func TestElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		racedecidertest.RunElection(t, func(t *testing.T, _ int) racedecidertest.Access {
			c := &cuttable{Decider: mem}
			return racedecidertest.Access{Decider: c, Cut: c.cut.Store}
		}, racedecidertest.Timing{TermLength: 10 * time.Second, MaxClockSkew: time.Second})
	})
}
