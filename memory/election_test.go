package memory_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// TestElection runs the election scenario in virtual time.
func TestElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewDecider()
		racedecidertest.RunElection(t, func(t *testing.T, _ int) racedecidertest.Access {
			return racedecidertest.Cuttable(mem)
		}, racedecidertest.Timing{TermLength: 10 * time.Second, MaxClockSkew: time.Second})
	})
}
