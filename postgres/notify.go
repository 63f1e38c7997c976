package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racedecider/leaderelection/entry"
)

// The listener checks an idle connection every pingInterval, so that a
// connection that died silently (a network partition that drops packets
// without a reset) is noticed within pingInterval + pingTimeout.
const (
	pingInterval = 15 * time.Second
	pingTimeout  = 5 * time.Second
)

// backoffConfig spaces out reconnections of the listener: the first pause
// is drawn from [min/2, min], each later one from a range twice as large,
// up to max. A connection that stayed up for max resets it.
type backoffConfig struct{ min, max time.Duration }

var defaultBackoff = backoffConfig{min: 200 * time.Millisecond, max: 15 * time.Second}

type backoff struct {
	backoffConfig
	cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

// WaitForChange implements leaderelection.ChangeNotifier. It blocks until
// the row's version is no longer token's, then returns the record as
// ReadCurrent does. It reads the row once listening, and again after each
// notification on the election's channel: a notification is a hint to read,
// never trusted, since any role may NOTIFY any channel.
//
// The first call starts a listener on a connection of its own, taken from
// the pool and kept until Close, and waits for it to listen. While that
// connection is down (until it is back, with capped jittered backoff),
// WaitForChange returns an error at once, so that the engine polls instead.
func (d *Decider) WaitForChange(ctx context.Context, token entry.LeaderToken) (*entry.RaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("postgres: wait for a change of %s: %w", d.name, err)
	}
	ln, err := d.listener()
	if err != nil {
		return nil, err
	}
	for {
		wake, err := ln.await(ctx)
		if err != nil {
			return nil, err
		}
		e, err := d.ReadCurrent(ctx)
		if err != nil {
			return nil, err
		}
		if !e.Token.SameVersion(token) {
			return e, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres: wait for a change of %s: %w", d.name, ctx.Err())
		case <-wake:
		}
	}
}

// listener returns d's listener, starting it on first use.
func (d *Decider) listener() (*listener, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("postgres: wait for a change of %s: the Decider is closed", d.name)
	}
	if d.ln == nil {
		d.ln = startListener(d)
	}
	return d.ln, nil
}

type listenState int

const (
	connecting listenState = iota // before the first attempt ended
	listening
	down
	stopped
)

// listener holds one connection that LISTENs on the election's channel and
// wakes every waiter on each notification and each change of state.
type listener struct {
	d      *Decider
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	state listenState
	err   error     // why it is down
	since time.Time // when it went down
	wake  chan struct{}
	conn  *pgx.Conn // while listening; for tests
}

func startListener(d *Decider) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{d: d, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{})}
	go l.run()
	return l
}

// await waits for the first connection attempt to end, then returns a
// channel closed at the next notification or change of state, or an error
// while the listener is not listening.
func (l *listener) await(ctx context.Context) (<-chan struct{}, error) {
	for {
		l.mu.Lock()
		state, err, since, wake := l.state, l.err, l.since, l.wake
		l.mu.Unlock()
		switch state {
		case listening:
			return wake, nil
		case down:
			return nil, fmt.Errorf("postgres: wait for a change of %s: no change notifications: the listener connection is down since %s (reconnecting): %w",
				l.d.name, since.Format(time.RFC3339), err)
		case stopped:
			return nil, fmt.Errorf("postgres: wait for a change of %s: the Decider is closed", l.d.name)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres: wait for a change of %s: connecting the listener: %w", l.d.name, ctx.Err())
		case <-wake:
		}
	}
}

// set changes the state and wakes every waiter.
func (l *listener) set(state listenState, conn *pgx.Conn, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == stopped {
		return
	}
	if state == down && l.state != down {
		l.since = time.Now()
	}
	l.state, l.conn, l.err = state, conn, err
	close(l.wake)
	l.wake = make(chan struct{})
}

// notify wakes every waiter.
func (l *listener) notify() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *listener) stop() {
	l.cancel()
	<-l.done
	l.mu.Lock()
	l.state, l.conn = stopped, nil
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

func (l *listener) run() {
	defer close(l.done)
	b := backoff{backoffConfig: l.d.backoff}
	for {
		conn, err := l.connect()
		if err == nil {
			l.set(listening, conn, nil)
			up := time.Now()
			err = l.listen(conn)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Close(closeCtx)
			cancel()
			if time.Since(up) >= b.max {
				b.cur = 0
			}
		}
		if l.ctx.Err() != nil {
			return
		}
		l.set(down, nil, err)
		// Back off after a broken connection too, not only after a failed
		// attempt: a server that accepts and then drops every connection
		// must not turn the listener into a reconnect storm.
		t := time.NewTimer(b.next())
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// connect takes a connection from the pool for good (so that it runs every
// hook the pool's configuration has) and LISTENs on it.
func (l *listener) connect() (*pgx.Conn, error) {
	ctx, cancel := l.d.opContext(l.ctx)
	defer cancel()
	pc, err := l.d.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.d.channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("LISTEN %s: %w", l.d.channel, err)
	}
	return conn, nil
}

// listen relays notifications until the connection fails or the listener
// stops.
func (l *listener) listen(conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(l.ctx, pingInterval)
		n, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			if n.Channel == l.d.channel {
				l.notify()
			}
			continue
		case l.ctx.Err() != nil:
			return err
		case !timedOut || conn.IsClosed():
			return fmt.Errorf("listening: %w", err)
		}
		// Idle for pingInterval: check that the connection still works. A
		// timeout leaves a pgx connection usable.
		pctx, cancel := context.WithTimeout(l.ctx, pingTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			if l.ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("checking the idle listener connection: %w", err)
		}
	}
}
