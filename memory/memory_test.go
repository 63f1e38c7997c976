package memory_test

import (
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/memory"
	"github.com/racedecider/leaderelection/racedecidertest"
)

func TestConformance(t *testing.T) {
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider { return memory.NewDecider() })
}

func TestCorrupt(t *testing.T) {
	d := memory.NewDecider()
	racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) { d.SetRaw(data) }, "memory: record")
}
