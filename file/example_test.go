package file_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/file"
)

// Two candidates on one host share a record file; the second takes over when
// the first stops. In production each candidate is its own process (or uses
// leaderelection.OpenDecider on "file:///var/lib/myjob/leader"), and the
// record's directory is one that outlives them.
func Example() {
	dir, err := os.MkdirTemp("", "leader")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	type tenure struct {
		leader string
		term   int64 // the fencing token
	}
	elected := make(chan tenure)
	candidate := func(ctx context.Context, id string) error {
		decider, err := file.NewDecider(filepath.Join(dir, "record"))
		if err != nil {
			return err
		}
		return leaderelection.Config{
			Decider:      decider,
			LeaderID:     id,
			TermLength:   time.Second,
			MaxClockSkew: 0, // one host, one clock
			OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
				elected <- tenure{id, tv.Term()}
				<-ctx.Done()
			},
		}.Acquire(ctx)
	}

	first, stopFirst := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() { firstDone <- candidate(first, "worker-1") }()
	t1 := <-elected
	fmt.Println(t1.leader, "leads")

	second, stopSecond := context.WithCancel(context.Background())
	secondDone := make(chan error, 1)
	go func() { secondDone <- candidate(second, "worker-2") }()
	stopFirst() // worker-1 releases its term on the way out
	fmt.Println(<-firstDone)
	t2 := <-elected // worker-2 found the release at its next read
	fmt.Println(t2.leader, "leads; fencing token went up:", t2.term > t1.term)
	stopSecond()
	fmt.Println(<-secondDone)
	// Output:
	// worker-1 leads
	// context canceled
	// worker-2 leads; fencing token went up: true
	// context canceled
}
