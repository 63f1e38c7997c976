package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
)

// A program written for github.com/vimeo/leaderelection, after migration. The
// comments mark what changed; see the README's migration section for the rest.
//
// The one change every program needs is in OnElected: vimeo's OnElected could
// start the work and return, and the process stayed leader. Here returning
// ends the tenure (the term is released), so OnElected starts the work as
// before and then blocks until its context ends.
func Example_migratingFromVimeo() {
	decider := memory.NewDecider() // gcs.NewDecider now also returns an error
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()

	// An observer, as legrpc's resolver is one: its first report is the first
	// leader; vimeo's Watch reported the empty store first.
	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	seen := make(chan leaderelection.Change, 8)
	go func() {
		_ = leaderelection.WatchConfig{Decider: decider, MaxClockSkew: time.Second}.
			Watch(watchCtx, func(_ context.Context, c leaderelection.Change) { seen <- c })
	}()

	var (
		newLeader entry.RaceEntry
		leaderTV  *leaderelection.TimeView
	)
	cfg := leaderelection.Config{
		Decider:      decider,
		LeaderID:     "scheduler-1",
		HostPort:     []string{"10.0.0.7:8080"}, // []string, as in vimeo
		TermLength:   10 * time.Second,
		MaxClockSkew: time.Second,
		// Called once per new leader, with the new leader's record (vimeo
		// passed the record its own win replaced: an empty one at first).
		LeaderChanged: func(_ context.Context, e entry.RaceEntry) { newLeader = e },
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			fmt.Println("elected")
			leaderTV = tv
			workDone := make(chan struct{})
			go func() { // the work, started as it was with vimeo
				defer close(workDone)
				c := <-seen // let the observer see this leader first
				fmt.Println("watcher saw:", c.Kind, c.Entry.LeaderID)
				if tv.ValueInFuture() { // before every action, as before
					// Pass tv.Term() along with every write the job makes.
					fmt.Println("job done as leader")
				}
				shutdown() // stands in for SIGTERM
			}()
			<-ctx.Done() // NEW: lead until leadership ends, not until return
			<-workDone   // and let the work stop before the term is released
		},
		OnOusting: func(context.Context) { fmt.Println("stepped down") },
	}
	// Some configurations vimeo accepted are rejected here (TermLength must
	// exceed 2 x MaxClockSkew); Acquire checks too, but failing at start-up
	// is clearer.
	if err := cfg.Validate(); err != nil {
		log.Fatal(err)
	}

	err := cfg.Acquire(ctx)
	// Store errors are retried inside Acquire; what comes back (an invalid
	// Config, a corrupt record, ErrRefused) needs an operator, not a retry
	// loop around Acquire.
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
	fmt.Println("Acquire returned:", err)
	fmt.Println("LeaderChanged got:", newLeader.LeaderID, newLeader.HostPort)
	// The TimeView now holds the instant the tenure ended, not the last
	// expiry: a stale copy can no longer pass for a leader.
	fmt.Println("TimeView valid after shutdown:", leaderTV.ValueInFuture())

	// Shutdown releases the term (set DisableRelease for vimeo's behaviour:
	// let it expire), so a successor takes over at once.
	c := <-seen
	fmt.Println("watcher saw:", c.Kind, c.Entry.LeaderID)
	rec, _ := decider.ReadCurrent(context.Background())
	// Fencing tokens start from the writer's clock in Unix microseconds, not
	// from 0: compare them, never count them.
	fmt.Println("record released:", rec.Released, "- same fencing token:", rec.Term == leaderTV.Term())
	// Output:
	// elected
	// watcher saw: elected scheduler-1
	// job done as leader
	// stepped down
	// Acquire returned: context canceled
	// LeaderChanged got: scheduler-1 [10.0.0.7:8080]
	// TimeView valid after shutdown: false
	// watcher saw: released scheduler-1
	// record released: true - same fencing token: true
}
