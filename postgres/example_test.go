package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/postgres"
)

// Runs one candidate of the election "reports" kept in the table
// leader_elections. Run the same program on several hosts: one of them leads
// at a time; another takes over within TermLength + MaxClockSkew if it dies,
// or at once if it stops cleanly, woken by a notification.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// The role needs SELECT, INSERT and UPDATE on the table.
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// Once, by a role that may create tables (or run the CREATE TABLE in
	// the package documentation in a migration).
	if err := postgres.CreateTable(ctx, pool, "leader_elections"); err != nil {
		log.Fatal(err)
	}

	decider, err := postgres.New(pool, "leader_elections", "reports")
	if err != nil {
		log.Fatal(err)
	}
	defer decider.Close()

	host, _ := os.Hostname()
	cfg := leaderelection.Config{
		Decider: decider,
		// Unique per process incarnation, not per host.
		LeaderID:     fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:8]),
		TermLength:   leaderelection.DefaultTermLength,
		MaxClockSkew: leaderelection.DefaultMaxClockSkew,
		OnElected: func(ctx context.Context, tv *leaderelection.TimeView) {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				// Check right before acting, and pass the fencing token
				// on so that downstream systems can refuse a deposed leader.
				if !tv.ValueInFuture() {
					return
				}
				log.Printf("sending reports as leader of term %d", tv.Term())
			}
		},
	}
	if err := cfg.Acquire(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}
