package leaderelection

import (
	"context"
	"errors"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
)

// pushedPollFactor stretches the poll interval of a watcher whose Decider
// pushes changes and that follows no live term: it still reads at that longer
// interval, so that a channel that stays silent without failing (a dropped
// subscription the store never reports) delays the news of the next leader
// by at most that much.
const pushedPollFactor = 8

// waiter waits for the record to change: by push when the Decider can push
// changes and its channel works, else by sleeping until the caller's next
// poll. Push is an optimisation: while it fails, the waiter polls at poll,
// telling onPushErr each time, and tries the channel again at each wait.
type waiter struct {
	clock clocks.Clock
	n     ChangeNotifier // nil: the Decider cannot push
	poll  time.Duration
	// onPushErr is told of each failed wait on the push channel;
	// onPushed, if set, of each record pushed and when its wait began.
	onPushErr func(error)
	onPushed  func(rec *entry.RaceEntry, began time.Time)
	// h is told of each wait on the push channel (OpWait).
	h *hook
	// sure: the last wait on the push channel that brought no record ran
	// its course with the channel vouching that nothing changed. Until
	// one does (a channel not listening yet), a change could go unseen
	// for a whole wait: callers wait no longer than a poll meanwhile.
	sure bool
}

// wait waits until until, or until the record identified by tok is replaced
// when the Decider pushes. It returns the pushed record if one came, or
// quiet = true if the push channel vouches that nothing changed before
// until. With neither (no push, a push channel that failed or could not
// vouch) the caller must read. Only ctx ending is an error.
func (w *waiter) wait(ctx context.Context, tok entry.LeaderToken, until time.Time) (pushed *entry.RaceEntry, quiet bool, err error) {
	if w.n == nil {
		if !w.clock.SleepUntil(ctx, until) {
			return nil, false, ctx.Err()
		}
		return nil, false, nil
	}
	wctx, cancel := w.clock.ContextWithDeadline(ctx, until)
	defer cancel()
	began := w.clock.Now()
	rec, err := w.n.WaitForChange(wctx, tok)
	if err == nil && rec != nil && rec.Token.SameVersion(tok) {
		// Not news. Were it taken for news, the caller would wait on
		// the channel again at once, in a loop: it failed instead.
		rec, err = nil, errEcho
	}
	vouched, reported := true, err
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		// The wait ran its course. Nothing changed if the channel says
		// so with the deadline's own error; any other (a channel not up
		// yet) vouches for nothing, and the caller reads. Only the
		// first is an answer (ResultOK) to the Observer.
		vouched = errors.Is(err, wctx.Err())
		if vouched {
			reported = nil
		}
		err = nil
	}
	w.h.request(OpWait, w.clock.Now().Sub(began), reported, ctx.Err())
	switch {
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case err == nil && rec != nil:
		if w.onPushed != nil {
			w.onPushed(rec, began)
		}
		return rec, false, nil
	case wctx.Err() != nil:
		w.sure = vouched
		return nil, vouched, nil
	case err == nil:
		err = errNoPushedRecord
	}
	// The channel failed before the deadline: fall back to a poll, no
	// sooner than poll after the attempt began, so that a channel that
	// fails at once cannot turn into a busy loop, and no later, so that a
	// broken channel cannot blind the caller.
	w.sure = false
	if w.onPushErr != nil {
		w.onPushErr(err)
	}
	if !w.clock.SleepUntil(ctx, minTime(until, began.Add(w.poll))) {
		return nil, false, ctx.Err()
	}
	return nil, false, nil
}

// errNoPushedRecord reports a ChangeNotifier that broke its contract by
// returning neither a record nor an error.
var errNoPushedRecord = errors.New("leaderelection: the Decider's WaitForChange returned no record and no error; polling instead")

// errEcho is the failure of a push channel that answered a wait with the
// record it was told to wait past, which a ChangeNotifier must not do.
var errEcho = errors.New("leaderelection: the push channel answered a wait with the record it was to wait past; polling instead")

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
