package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/racedecider/leaderelection/internal/backoff"
)

// ErrorClass exposes errorClass to the tests.
var ErrorClass = errorClass

// ChannelName returns the NOTIFY channel of d's election.
func ChannelName(d *Decider) string { return d.channel }

// WithReconnectBackoff sets the listener's reconnection backoff.
func WithReconnectBackoff(min, max time.Duration) Option {
	return func(d *Decider) { d.backoff = backoff.Backoff{Min: min, Max: max} }
}

// ListenerPID returns the server process id of d's listener connection, or
// 0 while it is not listening.
func ListenerPID(d *Decider) uint32 {
	d.mu.Lock()
	l := d.ln
	d.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != listening || l.conn == nil {
		return 0
	}
	return l.conn.PgConn().PID()
}

// AwaitListening blocks until d's listener listens (after starting it if
// needed), or ctx ends.
func AwaitListening(ctx context.Context, d *Decider) error {
	l, err := d.listener()
	if err != nil {
		return err
	}
	for {
		l.mu.Lock()
		state, wake := l.state, l.wake
		l.mu.Unlock()
		if state == listening {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// PoolOf returns d's pool.
func PoolOf(d *Decider) *pgxpool.Pool { return d.pool }

// TableOf returns d's table as New was given it.
func TableOf(d *Decider) string { return strings.Join(d.table, ".") }

// AwaitWaiters blocks until n WaitForChange calls wait on d's listener with
// every read asked for answered, or ctx ends.
func AwaitWaiters(ctx context.Context, d *Decider, n int) error {
	return awaitListener(ctx, d, func(l *listener) bool {
		return l.state == listening && l.waiters == n && l.asked == l.last.asOf
	})
}

// AwaitReadAsked blocks until d's listener has been asked for a read that
// has not answered yet (a notification it could not verify, say), or ctx
// ends.
func AwaitReadAsked(ctx context.Context, d *Decider) error {
	return awaitListener(ctx, d, func(l *listener) bool { return l.asked != l.last.asOf })
}

// awaitListener blocks until ok, called with the listener's lock held,
// holds, or ctx ends. Nothing signals what it waits for, so it looks every
// millisecond.
func awaitListener(ctx context.Context, d *Decider, ok func(*listener) bool) error {
	l, err := d.listener()
	if err != nil {
		return err
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		done := ok(l)
		l.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
