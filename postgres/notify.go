package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
)

// The listener checks an idle connection every pingInterval, so that a
// connection that died silently (a network partition that drops packets
// without a reset) is noticed within pingInterval + pingTimeout.
const (
	pingInterval = 15 * time.Second
	pingTimeout  = 5 * time.Second
)

// defaultBackoff spaces out the listener's reconnections and its reads after
// a failed one: the first pause is drawn from [100 ms, 200 ms], each later
// one from a range twice as large, up to 15 s. A connection that stayed up for
// the 15 s resets it.
var defaultBackoff = backoff.Backoff{Min: 200 * time.Millisecond, Max: 15 * time.Second}

// WaitForChange implements leaderelection.ChangeNotifier. It blocks until
// the row's version is no longer token's, then returns the record as
// ReadCurrent does.
//
// The first call starts a listener on a connection of its own, taken from
// the pool and kept until Close, and waits for it to listen. The listener
// takes each change from its notification when it can verify it (see the
// package comment), and otherwise reads the row once per notification, if
// anyone waits; it hands that one record to every waiter in this process. A
// waiter whose token is the record the listener last read or verified, with
// no unverified notification since, reads nothing; any other token costs a
// read begun after the call, shared with the waiters that arrive meanwhile.
//
// While the listener's connection is down (until it is back, with capped
// jittered backoff), WaitForChange returns an error at once, so that the
// engine polls instead. A wait that ctx ends returns an error wrapping
// ctx's only if the listener vouches that nothing changed up to then: it
// knew token current and has had no notification it could not verify, and
// no reconnection, since. Otherwise (still connecting, a read under way) the
// error does not wrap ctx's: it vouches for nothing, and the engine reads.
// Nor does any error of the listener's own (a read or a connection that
// timed out).
func (d *Decider) WaitForChange(ctx context.Context, token entry.LeaderToken) (*entry.RaceEntry, error) {
	// A ctx that has ended already is no shortcut: the answer still says
	// whether token is current, as far as the listener knows.
	ln, err := d.listener()
	if err != nil {
		return nil, err
	}
	// want is the first read whose result answers this waiter: one begun
	// after the call, or after the last read that found token. Zero until
	// the listener listens. The listener vouches that nothing changed
	// while it asked for no read since want-1 (see quiet).
	var want uint64
	defer func() {
		if want != 0 {
			ln.mu.Lock()
			ln.waiters--
			ln.mu.Unlock()
		}
	}()
	for {
		ln.mu.Lock()
		state, err, since, wake := ln.state, ln.err, ln.since, ln.wake
		var got readResult
		switch {
		case state != listening:
		case want == 0:
			ln.waiters++
			if ln.vouches(token) {
				want = ln.asked + 1
			} else {
				ln.askLocked()
				want = ln.asked
			}
		case ln.last.asOf >= want:
			got = ln.last
		}
		ln.mu.Unlock()
		switch state {
		case down:
			return nil, fmt.Errorf("postgres: wait for a change of %s: no change notifications: the listener connection is down since %s (reconnecting): %w",
				d.name, since.Format(time.RFC3339), noContext(err))
		case stopped:
			return nil, fmt.Errorf("postgres: wait for a change of %s: the Decider is closed", d.name)
		}
		switch {
		case got.err != nil:
			return nil, noContext(got.err)
		case got.rec == nil:
		case !got.rec.Token.SameVersion(token):
			return got.rec.Clone(), nil
		default:
			// Unchanged: the next read after a notification answers.
			want = got.asOf + 1
		}
		select {
		case <-ctx.Done():
			if !ln.quiet(want) {
				// Not ctx.Err() itself: the listener vouches for
				// nothing (see leaderelection.ChangeNotifier), and
				// the caller must read.
				return nil, fmt.Errorf("postgres: wait for a change of %s: ended (%v) before the listener could tell whether it changed", d.name, ctx.Err())
			}
			return nil, fmt.Errorf("postgres: wait for a change of %s: %w", d.name, ctx.Err())
		case <-wake:
		}
	}
}

// quiet reports whether the listener vouches, now, that nothing changed for
// a waiter whose answer is the read want: it is listening, and it has asked
// for no read since want-1, the one that found the waiter's token current
// (or the last one, current when the waiter arrived), so that no
// notification it could not verify, no verified change and no reconnection
// came since. A waiter whose read is still to come (want == asked) is not
// vouched for.
func (l *listener) quiet(want uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return want != 0 && l.state == listening && l.asked < want
}

// noContext returns err, from the listener's own work, such that it does not
// wrap a context's error: a caller whose deadline has passed too would take
// that for the deadline's own error, which vouches that nothing changed.
func noContext(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errors.New(err.Error())
	}
	return err
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

// listener holds one connection that LISTENs on the election's channel, and
// follows the row for every waiter in this process: from the notifications
// it can verify, and otherwise by reading it once per notification while
// anyone waits, so that a notification costs at most one read however many
// wait.
type listener struct {
	d          *Decider
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan struct{} // run has returned
	readerDone chan struct{} // reads has returned
	kick       chan struct{} // tells reads that a read is asked for

	mu    sync.Mutex
	state listenState
	err   error     // why it is down
	since time.Time // when it went down
	// wake is closed, and replaced, at each change of state and each read's
	// result.
	wake chan struct{}
	conn *pgx.Conn // while listening; for tests
	// waiters counts the WaitForChange calls under way: without any, a
	// notification is only noted, not read.
	waiters int
	// asked counts the reasons to read since the listener started: each
	// notification (a verified one answers itself), each (re)connection
	// (notifications may have been missed while it was down), each waiter whose
	// token the last read does not vouch for. A read begun when asked was n
	// answers every reason up to n.
	asked uint64
	last  readResult
}

// readResult is the outcome of the listener's latest read of the row.
type readResult struct {
	rec    *entry.RaceEntry // nil before the first read and on error
	secret []byte           // the row's, to check pushed changes with
	err    error
	asOf   uint64 // asked when the read began
}

func startListener(d *Decider) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{
		d: d, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), readerDone: make(chan struct{}), kick: make(chan struct{}, 1),
		wake: make(chan struct{}),
	}
	go l.run()
	go l.reads()
	return l
}

// vouches reports whether the last read found token and nothing has asked
// for a read since: a change after that read will be notified. Call with
// l.mu held.
func (l *listener) vouches(token entry.LeaderToken) bool {
	return l.last.err == nil && l.last.rec != nil && l.last.asOf == l.asked && l.last.rec.Token.SameVersion(token)
}

// askLocked asks for a read begun from now on, and has one made if anyone
// waits. Call with l.mu held.
func (l *listener) askLocked() {
	l.asked++
	if l.waiters > 0 {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// reads reads the row whenever a read is asked for and someone waits, one
// read at a time: the reasons that arrive during a read are answered
// together by the next one. After a failed read the next waits out a
// capped, jittered backoff, so that notifications arriving while the store
// fails (any role may NOTIFY) cannot make it read in a loop. It ends when
// the listener stops.
func (l *listener) reads() {
	defer close(l.readerDone)
	b := l.d.backoff
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.kick:
		}
		for l.ctx.Err() == nil {
			l.mu.Lock()
			n, pending := l.asked, l.asked != l.last.asOf && l.waiters > 0
			l.mu.Unlock()
			if !pending {
				break
			}
			e, secret, err := l.d.read(l.ctx)
			l.mu.Lock()
			l.last = readResult{rec: e, secret: secret, err: err, asOf: n}
			l.wakeLocked()
			l.mu.Unlock()
			if err == nil {
				b.Reset()
				continue
			}
			l.pause(b.Next())
		}
	}
}

// pause waits d, or until the listener stops; it reports whether the
// listener still runs.
func (l *listener) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.ctx.Done():
		return false
	case <-t.C:
		return true
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
	if state == listening {
		// Notifications sent while it was not listening are lost.
		l.askLocked()
	}
	l.wakeLocked()
}

// wakeLocked wakes every waiter. Call with l.mu held.
func (l *listener) wakeLocked() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// notify handles a notification on the election's channel: a change it
// can verify as the one that followed the record last read (or pushed) is
// taken as if read; anything else asks for a read, as the row may have
// changed.
func (l *listener) notify(payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.last
	// Only on top of a current record: with a read asked for, a pushed
	// change may be older than what the read will find.
	if last.err == nil && last.rec != nil && last.asOf == l.asked {
		if e, ok := verifyPush(payload, last.secret, last.rec.Token.Version); ok {
			l.asked++
			l.last = readResult{rec: e, secret: last.secret, asOf: l.asked}
			l.wakeLocked()
			return
		}
	}
	l.askLocked()
}

// verifyPush returns the record a notification's payload carries (see
// notifySQL) if its MAC is the row's, made with secret, and it replaced
// version prev. The MAC shows that a writer who could read the row sent it;
// the chain from prev, that it is the next change, not one replayed by a
// role that saw it go by (versions are random and never reused within a
// secret's life).
func verifyPush(payload string, secret []byte, prev string) (*entry.RaceEntry, bool) {
	i := strings.LastIndexByte(payload, ' ')
	if len(secret) != secretSize || i < 0 {
		return nil, false
	}
	m := payload[:i]
	mac, err := hex.DecodeString(payload[i+1:])
	if err != nil {
		return nil, false
	}
	k := secretSize / 2 // k1 and k2, each one SHA-256 block
	inner := sha256.Sum256(append(secret[:k:k], m...))
	outer := sha256.Sum256(append(secret[k:secretSize:secretSize], inner[:]...))
	if !hmac.Equal(mac, outer[:]) {
		return nil, false
	}
	f := strings.Split(m, " ")
	if len(f) != 5 || f[0] != "lev1" || f[1] != prev {
		return nil, false
	}
	micros, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return nil, false
	}
	body, err := base64.StdEncoding.DecodeString(f[4])
	if err != nil {
		return nil, false
	}
	e, err := entry.Unmarshal(body)
	if err != nil {
		return nil, false
	}
	e.Token = entry.LeaderToken{Version: f[2], CommitTime: time.UnixMicro(micros)}
	return e, true
}

func (l *listener) stop() {
	l.cancel()
	<-l.done
	<-l.readerDone
	l.mu.Lock()
	l.state, l.conn = stopped, nil
	l.wakeLocked()
	l.mu.Unlock()
}

func (l *listener) run() {
	defer close(l.done)
	b := l.d.backoff
	for {
		conn, err := l.connect()
		if err == nil {
			l.set(listening, conn, nil)
			up := time.Now()
			err = l.listen(conn)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Close(closeCtx)
			cancel()
			if time.Since(up) >= b.Max {
				b.Reset()
			}
		}
		if l.ctx.Err() != nil {
			return
		}
		l.set(down, nil, err)
		// Back off after a broken connection too, not only after a failed
		// attempt: a server that accepts and then drops every connection
		// must not turn the listener into a reconnect storm.
		if !l.pause(b.Next()) {
			return
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
		case err == nil && n == nil:
			// The pool's own OnNotification handler took it (pgx keeps
			// notifications only without one): a change, unverified.
			l.notify("")
			continue
		case err == nil:
			if n.Channel == l.d.channel {
				l.notify(n.Payload)
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
