package s3_test

import (
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
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
		faultproxy.RunElection(t, s.hostPort(t), func(t *testing.T, proxyAddr string) leaderelection.RaceDecider {
			d, err := les3.NewDecider(s.client(t, "http://"+proxyAddr), s.bucket, key)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, racedecidertest.Timing{TermLength: 2 * time.Second, MaxClockSkew: 200 * time.Millisecond})
	})
}
