package legrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	clocks "github.com/vimeo/go-clocks"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/hooks"
)

// The ErrorInfo detail of a call rejected by a Guard carries this Reason and
// Domain. NotLeaderFromError reads it back.
const (
	NotLeaderReason = "NOT_LEADER"
	NotLeaderDomain = "leaderelection.racedecider.github.com"
)

// Guard keeps a gRPC server from serving while its process does not lead an
// election. Attach it to the process's leaderelection.Config, and install its
// interceptors on the server:
//
//	var guard legrpc.Guard
//	cfg = guard.Attach(cfg)
//	srv := grpc.NewServer(
//		grpc.UnaryInterceptor(guard.UnaryServerInterceptor()),
//		grpc.StreamInterceptor(guard.StreamServerInterceptor()))
//
// A call is admitted only if, when it arrives, this process leads: it is
// inside OnElected, its elected context has not ended, and its TimeView is in
// the future. Any other call is rejected with codes.Unavailable and an
// errdetails.ErrorInfo naming the leader this process last saw (see
// NotLeaderFromError), which the retry policy of DefaultServiceConfig turns
// into a transparent retry once the client's resolver has found the leader.
//
// The check is made once, on arrival. A handler that runs for a while must
// check again before each action that needs leadership, with the TimeView
// that TimeViewFromContext returns, and should pass its Term to downstream
// systems as a fencing token (see the package documentation). The handler's
// context is cancelled when the leadership ends; an error the handler returns
// after that is replaced by the same codes.Unavailable rejection, so that the
// client retries on the new leader. Such a call may have been partly served:
// see DefaultServiceConfig on retries.
//
// The zero Guard is ready to use. Set its fields, if at all, before Attach.
// A Guard belongs to one Config.
type Guard struct {
	// OnReject, if set, is called for every call rejected because this
	// process did not lead, with the call's full method name. It must be
	// fast and safe for concurrent use (a metrics counter, say).
	OnReject func(ctx context.Context, fullMethod string)

	// Logger receives a debug record for every rejected call. Nil discards
	// them.
	Logger *slog.Logger

	self   atomic.Pointer[string]          // the Config's LeaderID
	tenure atomic.Pointer[tenure]          // set while OnElected runs
	leader atomic.Pointer[entry.RaceEntry] // the leader last seen
}

// tenure is the leadership this process holds, as handed to OnElected, and
// the calls admitted under it.
type tenure struct {
	ctx context.Context // the elected context
	tv  *leaderelection.TimeView

	mu     sync.Mutex
	calls  int           // admitted and still running
	closed bool          // admits no more calls
	idle   chan struct{} // closed once closed and no call runs
}

// enter admits one call, unless the tenure is closing.
func (t *tenure) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.calls++
	return true
}

func (t *tenure) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls--
	if t.closed && t.calls == 0 {
		close(t.idle)
	}
}

// close stops admitting calls and returns a channel closed once the calls
// already admitted have returned.
func (t *tenure) close() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		if t.calls == 0 {
			close(t.idle)
		}
	}
	return t.idle
}

// Attach returns cfg with the Guard wired in: OnElected (which, if nil, just
// holds the leadership until it ends) is wrapped so that the Guard admits
// calls while it runs, and LeaderChanged so that a rejection can name the
// leader. Existing callbacks keep running as before.
//
// The wrapped OnElected returns only once every call admitted during the
// tenure has returned, or the term has expired, whichever comes first: the
// engine writes a release (which lets a successor take over at once) only
// after OnElected returns and only while the term is still held, so that no
// admitted call runs on when another leader is elected. A handler's context
// ends with the leadership, which is the signal to return promptly. When
// OnElected returns while the term is held, the engine goes on extending it
// while the calls drain, but the drain ends with the term as it stood then:
// calls still running end the term unreleased, and it is left to expire.
// The candidate pauses before campaigning again, as after any early return.
func (g *Guard) Attach(cfg leaderelection.Config) leaderelection.Config {
	self := cfg.LeaderID
	g.self.Store(&self)
	clock := cfg.Clock
	if clock == nil {
		clock = clocks.DefaultClock()
	}
	onElected := cfg.OnElected
	if onElected == nil {
		onElected = func(ctx context.Context, _ *leaderelection.TimeView) { <-ctx.Done() }
	}
	cfg.OnElected = func(ctx context.Context, tv *leaderelection.TimeView) {
		// Admitted calls end with this context: with the leadership, or
		// as soon as the wrapped OnElected returns.
		tctx, cancel := context.WithCancel(ctx)
		defer cancel()
		t := &tenure{ctx: tctx, tv: tv, idle: make(chan struct{})}
		g.tenure.Store(t)
		onElected(ctx, tv)
		if ctx.Err() == nil && tv.ValueInFuture() {
			// The engine learns it only once the drain is over, maybe
			// past the term: it pauses after such a tenure.
			hooks.ReturnedEarly(tv)
		}
		g.tenure.CompareAndSwap(t, nil)
		cancel()
		// Drain: wait for the admitted calls, but not past the term as
		// it stood when OnElected returned. The engine extends the term
		// while this runs (OnElected returned while the leadership
		// lasted), so that a call that ignores its context would
		// otherwise hold the leadership for ever, serving nothing. Past
		// that, the term is ended here: the engine neither extends nor
		// releases it, and leaves it to expire, as at a shutdown.
		bound := clock.Now().Add(tv.Remaining())
		idle := t.close()
		drained, stop := context.WithCancel(context.Background())
		defer stop()
		go func() {
			select {
			case <-idle:
				stop()
			case <-drained.Done():
			}
		}()
		for drained.Err() == nil && tv.ValueInFuture() {
			left := min(tv.Remaining(), clock.Until(bound))
			if left <= 0 {
				hooks.EndTimeView(tv)
				break
			}
			clock.SleepFor(drained, left)
		}
	}
	leaderChanged := cfg.LeaderChanged
	cfg.LeaderChanged = func(ctx context.Context, e entry.RaceEntry) {
		g.leader.Store(e.Clone())
		if leaderChanged != nil {
			leaderChanged(ctx, e)
		}
	}
	return cfg
}

// Leading returns this process's TimeView if it leads at this instant.
func (g *Guard) Leading() (*leaderelection.TimeView, bool) {
	t := g.current()
	if t == nil {
		return nil, false
	}
	return t.tv, true
}

// current returns the tenure if it is valid now, else nil.
func (g *Guard) current() *tenure {
	t := g.tenure.Load()
	if t == nil || t.ctx.Err() != nil || !t.tv.ValueInFuture() {
		return nil
	}
	return t
}

type tvKey struct{}

// errLeadershipEnded is the cause of a handler's context ending because the
// leadership under which its call was admitted ended.
var errLeadershipEnded = errors.New("legrpc: leadership ended while serving")

// TimeViewFromContext returns the TimeView of the tenure under which a Guard
// admitted the call whose context ctx is. Check its ValueInFuture before an
// action that needs leadership, and pass its Term downstream as the fencing
// token.
func TimeViewFromContext(ctx context.Context) (*leaderelection.TimeView, bool) {
	tv, ok := ctx.Value(tvKey{}).(*leaderelection.TimeView)
	return tv, ok
}

// admit returns the context to serve a call in, ending with the leadership,
// and a function to call when the call is done; or the rejection.
func (g *Guard) admit(ctx context.Context, fullMethod string) (context.Context, func(error) error, error) {
	t := g.current()
	if t == nil || !t.enter() {
		return nil, nil, g.reject(ctx, fullMethod)
	}
	hctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(t.ctx, func() { cancel(errLeadershipEnded) })
	hctx = context.WithValue(hctx, tvKey{}, t.tv)
	done := func(err error) error {
		stop()
		if err != nil && errors.Is(context.Cause(hctx), errLeadershipEnded) {
			err = g.reject(ctx, fullMethod)
		}
		cancel(nil)
		t.leave()
		return err
	}
	return hctx, done, nil
}

// UnaryServerInterceptor returns an interceptor that admits unary calls only
// while this process leads.
func (g *Guard) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		hctx, done, err := g.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		// Deferred, so that a handler that panics (recovered by an
		// interceptor outside this one) still leaves the tenure, whose
		// drain would otherwise wait for it until the term expired.
		defer func() { err = done(err) }()
		return handler(hctx, req)
	}
}

// StreamServerInterceptor returns an interceptor that admits streaming calls
// only while this process leads. A stream's context ends with the leadership,
// so that a long-lived stream does not outlast it.
func (g *Guard) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		hctx, done, err := g.admit(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		defer func() { err = done(err) }() // even if handler panics: see UnaryServerInterceptor
		return handler(srv, &guardedStream{ServerStream: ss, ctx: hctx})
	}
}

type guardedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *guardedStream) Context() context.Context { return s.ctx }

// reject returns the codes.Unavailable status of a call this process may not
// serve, naming the leader it last saw unless that is itself.
func (g *Guard) reject(ctx context.Context, fullMethod string) error {
	if g.OnReject != nil {
		g.OnReject(ctx, fullMethod)
	}
	info := &errdetails.ErrorInfo{Reason: NotLeaderReason, Domain: NotLeaderDomain}
	msg := "legrpc: this server does not lead the election"
	if l := g.leader.Load(); l != nil && (g.self.Load() == nil || l.LeaderID != *g.self.Load()) {
		info.Metadata = map[string]string{
			"leader_id": l.LeaderID,
			"host_port": strings.Join(l.HostPort, ","),
			"term":      strconv.FormatInt(l.Term, 10),
		}
		msg = fmt.Sprintf("%s; the last leader it saw is %s at %s (term %d)", msg, l.LeaderID, strings.Join(l.HostPort, ","), l.Term)
	}
	if g.Logger != nil {
		g.Logger.DebugContext(ctx, "rejected a call: not the leader", "method", fullMethod)
	}
	st, err := status.New(codes.Unavailable, msg).WithDetails(info)
	if err != nil {
		// Only a detail that does not marshal fails; ErrorInfo always does.
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}

// NotLeader is what a Guard's rejection says about the leader.
type NotLeader struct {
	// LeaderID, HostPort and Term describe the leader the rejecting server
	// last saw: a hint, possibly out of date. LeaderID is empty and Term -1
	// when it knew of none (other than itself).
	LeaderID string
	HostPort []string
	Term     int64
}

// NotLeaderFromError reports whether err (as returned by a client call) is a
// Guard's rejection, and what it says about the leader, for logging. A client
// need not act on it: the resolver finds the leader by itself.
func NotLeaderFromError(err error) (NotLeader, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return NotLeader{}, false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetReason() != NotLeaderReason || info.GetDomain() != NotLeaderDomain {
			continue
		}
		md := info.GetMetadata()
		nl := NotLeader{LeaderID: md["leader_id"], Term: -1}
		if hp := md["host_port"]; hp != "" {
			nl.HostPort = strings.Split(hp, ",")
		}
		if t, err := strconv.ParseInt(md["term"], 10, 64); err == nil {
			nl.Term = t
		}
		return nl, true
	}
	return NotLeader{}, false
}
