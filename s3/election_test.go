package s3_test

import (
	"testing"
	"time"

	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
	les3 "github.com/racedecider/leaderelection/s3"
)

// TestElection runs a full election through Config.Acquire: three
// candidates, each with its own client through its own fault proxy, so that
// one candidate's access can be cut while the others keep theirs.
func TestElection(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store) {
		key := newKey()
		racedecidertest.RunElection(t, func(t *testing.T, candidate int) racedecidertest.Access {
			p := faultproxy.Start(t, s.hostPort(t))
			d, err := les3.NewDecider(s.client(t, "http://"+p.Addr()), s.bucket, key)
			if err != nil {
				t.Fatal(err)
			}
			return racedecidertest.Access{Decider: d, Cut: p.SetCut}
		}, racedecidertest.Timing{TermLength: 2 * time.Second, MaxClockSkew: 200 * time.Millisecond})
	})
}
