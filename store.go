package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
)

// This file is the engine's only path to the store: reads retried with
// backoff, writes resolved by reading back, the error classes that decide
// what is retried, and the latencies that size the engine's waits. The
// campaign (campaign.go), the tenure (leader.go) and Watch (watch.go) call
// down into it.

func isRaceLost(err error) bool  { return errors.Is(err, entry.ErrRaceLost) }
func isThrottled(err error) bool { return errors.Is(err, entry.ErrThrottled) }
func isRefused(err error) bool   { return errors.Is(err, entry.ErrRefused) }

// storeName names d in errors, logs and Events: its String method if it has
// one (backends name their bucket and object), else its type. A name that is
// not UTF-8 (a file path may hold any bytes) has those bytes written \xNN,
// and its backslashes \\, so that metric labels, which must be UTF-8, can
// carry it, and two such names stay apart. (A UTF-8 name is kept as it is:
// one that spells out \xNN itself can still meet one that is not UTF-8.)
func storeName(d RaceDecider) string {
	s, ok := d.(fmt.Stringer)
	if !ok {
		return fmt.Sprintf("%T", d)
	}
	name := s.String()
	if utf8.ValidString(name) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, name[i])
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(name[i : i+n])
		}
		i += n
	}
	return b.String()
}

// refusal is the error that ends Acquire or Watch when the store refuses for
// good: retrying cannot help, and an operator must act.
func refusal(d RaceDecider, err error) error {
	return fmt.Errorf("leaderelection: store %s refused the request; not retrying: %w", storeName(d), err)
}

// errNoRecord reports a Decider that broke its contract by returning neither
// a record nor an error.
var errNoRecord = errors.New("leaderelection: the Decider's ReadCurrent returned no record and no error")

// readRetrying reads until it succeeds, ctx ends, or deadline (if not zero)
// passes, each read bounded by timeout, backing off between failures from
// maxWait/64 up to maxWait. A refusal stops it at once (see refusal); every
// other failure goes to onErr, and a non-nil result from onErr stops the
// retries and is returned.
//
// Successful reads' round trips go to rtt, if not nil.
func readRetrying(ctx context.Context, clock clocks.Clock, r *rng, rtt *latencies, h *hook, d RaceDecider, timeout, maxWait time.Duration, deadline time.Time, onErr func(error) error) (*entry.RaceEntry, error) {
	// A read cut short by the deadline failed; only one cut short by the
	// caller was canceled.
	caller := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = clock.ContextWithDeadline(ctx, deadline)
		defer cancel()
	}
	b := newBackoff(r, maxWait/64, maxWait)
	for {
		rctx, cancel := clock.ContextWithTimeout(ctx, timeout)
		t0 := clock.Now()
		rec, err := d.ReadCurrent(rctx)
		cancel()
		t1 := clock.Now()
		if err == nil && rtt != nil {
			rtt.add(t1.Sub(t0))
		}
		if err == nil && rec == nil {
			err = errNoRecord
		}
		h.request(OpRead, t1.Sub(t0), err, caller.Err())
		if err == nil {
			h.sample(t0, t1, rec.Token, false)
		}
		switch {
		case err == nil:
			return rec, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case isRefused(err):
			return nil, refusal(d, err)
		}
		if stop := onErr(err); stop != nil {
			return nil, stop
		}
		if !clock.SleepFor(ctx, b.Next()) {
			return nil, ctx.Err()
		}
	}
}

// write writes next (conditioned on next.Token, under a fresh WriteID) before
// deadline and returns the record the store holds afterwards. mine reports
// that the store holds a record written by this candidate: next, or an
// earlier write whose outcome was unknown and that was applied after all;
// then cd.sentAt is when that write was sent.
//
// The store's answer decides what follows. A throttled write was not applied
// and is returned as an error for the caller to back off; a refused one ends
// the campaign (the error wraps ErrRefused). A lost race or an unknown
// outcome is resolved by reading back write ids, as a transport error can hide
// a success. Otherwise err is set only when ctx ended or the deadline passed
// with the outcome still unknown.
func (cd *candidate) write(ctx context.Context, next *entry.RaceEntry, deadline time.Time) (stored *entry.RaceEntry, mine bool, err error) {
	// A write sent now could only leave an outcome to resolve: its caller
	// has stopped, or the term it serves is already over (a process that
	// was paused wakes up here).
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	t0 := cd.Clock.Now()
	// An extension must land with time to spare; a release only before
	// its deadline.
	margin := cd.TermLength / 4
	if next.Released {
		margin = 0
	}
	if at := cd.writableAt(next.Token); t0.Before(at) && at.Before(deadline.Add(-margin)) {
		// Too soon after the last write for the store (WriteSpacer), and
		// the term leaves time to wait: an extension or a release right
		// after another write. (Acquisitions have waited already.)
		if !cd.Clock.SleepUntil(ctx, at) {
			return nil, false, ctx.Err()
		}
		now := cd.Clock.Now()
		if next.Released {
			// A release tells when it was sent (see committedAtMost).
			next.TermExpiry = now
		} else {
			// The term counts from when the write is sent, as does the
			// TimeView's monotonic end (sentAt + TermLength): were the
			// expiry left as it was, that end would outlast it by the
			// wait, and the monotonic guard against a wall clock stepped
			// back would lag by as much.
			next.TermExpiry = next.TermExpiry.Add(now.Sub(t0))
		}
		t0 = now
	}
	if !t0.Before(deadline) {
		return nil, false, context.DeadlineExceeded
	}
	// Each attempt gets its own id, drawn only for a write that is sent.
	next.WriteID = cd.rng.writeID()
	// A request that hangs (a connection dropped without a reset) is given
	// up early enough to read back and try again, as a failed one is,
	// rather than use up the term: with time left for a read and a write
	// twice as slow as the slowest recent ones. Only when that still gives
	// this attempt twice the slowest recent write: a store that became
	// slow must not have every attempt cut short.
	end := deadline
	if slow := cd.writes.slowest(); cd.writes.n > 0 {
		if cut := deadline.Add(-2*(slow+cd.rtt.slowest()) - cd.TermLength/32); cut.Sub(t0) >= 2*slow {
			end = cut
		}
	}
	wctx, cancel := cd.Clock.ContextWithDeadline(ctx, end)
	tok, werr := cd.Decider.WriteEntry(wctx, next)
	cancel()
	t1 := cd.Clock.Now()
	took := t1.Sub(t0)
	cd.obs.request(OpWrite, took, werr, ctx.Err())
	switch {
	case werr == nil:
		cd.obs.sample(t0, t1, tok, true)
		cd.rtt.add(took)
		cd.writes.add(took)
		cd.noteVersion(tok, t1)
		if took > cd.TermLength/4 && !cd.slowWarned {
			// Extensions are timed from the slowest recent writes, but
			// a term whose extension can take half of what is left of
			// it leaves no room for a retry.
			cd.slowWarned = true
			cd.log.Warn("a write took more than a quarter of TermLength: terms may be lost to one slow write; use a longer TermLength",
				"took", took, "term_length", cd.TermLength)
		}
		next.Token = tok
		cd.pending, cd.sentAt = nil, t0
		return next, true, nil
	case isRefused(werr):
		return nil, false, refusal(cd.Decider, werr)
	case isThrottled(werr):
		cd.log.Warn("the store throttled a write; backing off", "election", next.ElectionNumber, "err", werr)
		return nil, false, werr
	case isRaceLost(werr):
		cd.rtt.add(took)
		cd.writes.add(took)
	default:
		cd.log.Warn("write outcome unknown; reading it back", "election", next.ElectionNumber, "err", werr)
		// It may have been applied, by now: the next write keeps the
		// store's write interval from it too (see writableAt).
		cd.unsureAt = t1
	}
	// Kept even for a lost race: a backend's own retry of an applied write
	// can report one, and the write id is the only proof either way.
	cd.pending = append(cd.pending, pendingWrite{writeID: next.WriteID, on: next.Token, sentAt: t0})
	rec, rerr := readRetrying(ctx, cd.Clock, cd.rng, &cd.rtt, cd.obs, cd.Decider, cd.opTimeout(), cd.opTimeout(), deadline, func(err error) error {
		cd.log.Warn("reading back a write failed; retrying", "err", err)
		return nil
	})
	if rerr != nil {
		return nil, false, rerr
	}
	// A release of ours says nothing of a write that is not one: it may be
	// the leftover of a release whose outcome was unknown, from before an
	// acquisition that is still on its way.
	if p, ok := cd.ours(rec); ok && (!rec.Released || next.Released) {
		cd.pending, cd.sentAt = nil, p.sentAt
		return rec, true, nil
	}
	return rec, false, nil
}

// pendingWrite is a write whose outcome was unknown and that may still be
// applied: a record carrying its write id is ours.
type pendingWrite struct {
	writeID string
	// on is the token the write was conditioned on; once the store holds
	// another record the write can never apply.
	on entry.LeaderToken
	// sentAt is when it was sent, on this process's clock (with its
	// monotonic reading): a term it won counts from then.
	sentAt time.Time
}

// ours returns the pending write that stored rec, if one did.
func (cd *candidate) ours(rec *entry.RaceEntry) (pendingWrite, bool) {
	for _, p := range cd.pending {
		if p.writeID == rec.WriteID {
			return p, true
		}
	}
	return pendingWrite{}, false
}

// latencies keeps the last few durations of one kind of store call.
type latencies struct {
	samples [8]time.Duration
	n       int
}

func (t *latencies) add(d time.Duration) {
	t.samples[t.n%len(t.samples)] = max(d, 0)
	t.n++
}

func (t *latencies) recent() []time.Duration { return t.samples[:min(t.n, len(t.samples))] }

// fastest is the shortest recent sample: the round trip as the store can
// give it, undisturbed by one slow call (a retry, a connection set-up). It
// sizes the herd window.
func (t *latencies) fastest() time.Duration {
	if t.n == 0 {
		return 0
	}
	return slices.Min(t.recent())
}

// typical is the mean of the recent samples but the slowest: what a sample
// usually is, where fastest is what it can be, and one slow sample (a
// reconnection, a pause) does not count.
func (t *latencies) typical() time.Duration {
	r := t.recent()
	if len(r) < 2 {
		return t.fastest()
	}
	var sum time.Duration
	for _, d := range r {
		sum += d
	}
	return (sum - slices.Max(r)) / time.Duration(len(r)-1)
}

// slowest is the longest recent sample: what an extension must be ready
// for.
func (t *latencies) slowest() time.Duration {
	if t.n == 0 {
		return 0
	}
	return slices.Max(t.recent())
}
