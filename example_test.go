package leaderelection_test

import (
	"context"
	"fmt"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/memory"
)

// A candidate campaigns with Acquire. While it leads, OnElected runs; it
// checks the TimeView before each action and passes the fencing token to
// whatever it writes. Cancelling Acquire's context releases the leadership.
func ExampleConfig_Acquire() {
	decider := memory.NewDecider() // gcs.NewDecider or s3.NewDecider in production
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	var token int64 // the fencing token of this candidate's tenure
	err := leaderelection.Config{
		Decider:      decider,
		LeaderID:     "worker-1",
		TermLength:   2 * time.Second,
		MaxClockSkew: 200 * time.Millisecond,
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			// Pass tv.Term() to downstream systems with every write.
			token = tv.Term()
			fmt.Println("elected")
			if tv.ValueInFuture() {
				fmt.Println("still leader: doing one unit of work")
			}
			stop() // done for today: stop campaigning
			<-ctx.Done()
		},
		OnOusting: func(context.Context) { fmt.Println("stepped down") },
	}.Acquire(ctx)
	fmt.Println("Acquire returned:", err)

	rec, _ := decider.ReadCurrent(context.Background())
	fmt.Println("record released:", rec.Released, "- its fencing token:", rec.Term == token)
	// Output:
	// elected
	// still leader: doing one unit of work
	// stepped down
	// Acquire returned: context canceled
	// record released: true - its fencing token: true
}

// Watch follows an election without campaigning: each new leader, extension,
// release and expiry is reported once.
func ExampleWatchConfig_Watch() {
	decider := memory.NewDecider()
	ctx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	elected, released := make(chan struct{}), make(chan struct{})

	watchDone := make(chan error)
	go func() {
		watchDone <- leaderelection.WatchConfig{Decider: decider, MaxClockSkew: 200 * time.Millisecond}.
			Watch(ctx, func(_ context.Context, c leaderelection.Change) {
				fmt.Printf("%v: %s at %v\n", c.Kind, c.Entry.LeaderID, c.Entry.HostPort)
				switch c.Kind {
				case leaderelection.LeaderElected:
					close(elected)
				case leaderelection.LeaderReleased:
					close(released)
				}
			})
	}()

	campaign, resign := context.WithCancel(context.Background())
	_ = leaderelection.Config{
		Decider:      decider,
		LeaderID:     "worker-1",
		HostPort:     []string{"10.0.0.7:8080"},
		TermLength:   2 * time.Second,
		MaxClockSkew: 200 * time.Millisecond,
		OnElected: func(ctx context.Context, _ *leaderelection.TimeView) {
			<-elected // let the watcher see this leader before resigning
			resign()
			<-ctx.Done()
		},
	}.Acquire(campaign)
	<-released
	stopWatching()
	fmt.Println("Watch returned:", <-watchDone)
	// Output:
	// elected: worker-1 at [10.0.0.7:8080]
	// released: worker-1 at [10.0.0.7:8080]
	// Watch returned: context canceled
}
