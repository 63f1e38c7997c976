package legrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	clocks "github.com/vimeo/go-clocks"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
	"github.com/racedecider/leaderelection/internal/hooks"
)

// Scheme is the URI scheme of the targets a Builder resolves:
// "leaderelection:///<election name>".
const Scheme = "leaderelection"

// ErrNoLeader is wrapped by the error the resolver hands gRPC while an
// election has no valid leader: none elected yet, the last one released, or
// its term expired. A call that does not wait for ready fails with
// codes.Unavailable and this error's text.
var ErrNoLeader = errors.New("legrpc: the election has no leader")

// Builder is a resolver.Builder for targets "leaderelection:///<name>". The
// resolver it builds follows an election with leaderelection.WatchConfig.Watch
// and hands gRPC the current leader's HostPort addresses (empty ones left
// out: a leader with none is no leader to route to), with the service config
// the leader publishes in ConnectionParams.
//
// Give it to one client with grpc.WithResolvers, or to every client of the
// process with resolver.Register:
//
//	b := legrpc.NewBuilder(leaderelection.WatchConfig{Decider: d, MaxClockSkew: time.Second})
//	conn, err := grpc.NewClient("leaderelection:///scheduler", grpc.WithResolvers(b), creds)
//
// The target's name is also the authority gRPC sends (and checks a TLS
// certificate against) unless the client sets grpc.WithAuthority.
type Builder struct {
	lookup func(name string) (leaderelection.WatchConfig, error)
	// base, when set, gives resolvers' watches its values (see
	// hooks.ResolverContext).
	base context.Context
}

func init() {
	hooks.ResolverContext = func(b any, ctx context.Context) { b.(*Builder).base = ctx }
}

// NewBuilder returns a Builder that resolves every target, whatever its name,
// to the leader of the election watched through cfg.
func NewBuilder(cfg leaderelection.WatchConfig) *Builder {
	return NewBuilderFunc(func(string) (leaderelection.WatchConfig, error) { return cfg, nil })
}

// NewBuilderFunc returns a Builder for several elections: it resolves the
// target "leaderelection:///<name>" through the WatchConfig lookup returns
// for name. An error from lookup fails the client's connection attempts.
func NewBuilderFunc(lookup func(name string) (leaderelection.WatchConfig, error)) *Builder {
	return &Builder{lookup: lookup}
}

// Scheme implements resolver.Builder.
func (b *Builder) Scheme() string { return Scheme }

// Build implements resolver.Builder. The resolver reads the record at once,
// then follows it with WatchConfig.Watch until Close. A refusal
// (leaderelection.ErrRefused), which ends a Watch, does not end it: gRPC (so
// calls that do not wait for ready), OnError and the Logger are told, and the
// record is read again with backoff, capped at a minute (or PollInterval if
// longer), until the store answers. Build fails only for an invalid
// WatchConfig or a name the lookup does not know.
//
// The WatchConfig's Observer sees the watcher's requests, not the
// resolver's own reads (the first, one per ResolveNow served, one at a
// term's expiry, and those after a refusal): metrics built on it count
// those out.
func (b *Builder) Build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions) (resolver.Resolver, error) {
	if b == nil || b.lookup == nil {
		return nil, errors.New("legrpc: a Builder must come from NewBuilder or NewBuilderFunc with a lookup")
	}
	name := target.Endpoint()
	cfg, err := b.lookup(name)
	if err != nil {
		return nil, fmt.Errorf("legrpc: target %q: %w", target, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("legrpc: target %q: %w", target, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clocks.DefaultClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	poll := cfg.PollInterval
	if poll == 0 {
		poll = leaderelection.DefaultWatchPollInterval
	}
	store := fmt.Sprintf("%T", cfg.Decider)
	if s, ok := cfg.Decider.(fmt.Stringer); ok {
		store = s.String()
	}
	r := &electionResolver{
		name:          name,
		cc:            cc,
		clock:         cfg.Clock,
		log:           cfg.Logger.With("election", name),
		decider:       cfg.Decider,
		store:         store,
		poll:          poll,
		noConfig:      opts.DisableServiceConfig,
		readTimeout:   min(max(poll, time.Second), maxReadTimeout),
		resolveSpacer: poll / 4,
		poke:          make(chan struct{}, 1),
		configs:       map[string]*serviceconfig.ParseResult{},
	}
	cfg.Observer = leaderelection.Observers(cfg.Observer, leaderelection.ObserverFunc(func(e leaderelection.Event) {
		if e.Kind == leaderelection.EventStoreRequest && e.Op == leaderelection.OpRead && e.Result != leaderelection.ResultCanceled {
			r.readDone(e.Err)
		}
	}))
	userOnError := cfg.OnError
	cfg.OnError = func(ctx context.Context, err error) {
		r.readFailed(err)
		if userOnError != nil {
			userOnError(ctx, err)
		}
	}

	base := context.Background()
	if b.base != nil {
		base = context.WithoutCancel(b.base)
	}
	ctx, cancel := context.WithCancel(base)
	r.ctx, r.cancel = ctx, cancel
	// Both drawn here, before the watcher draws from the same source.
	rb, fb := r.newBackoff(base), r.newBackoff(base)
	r.wg.Go(func() { r.refresh(ctx, rb) })
	r.wg.Go(func() { r.follow(ctx, fb, cfg, userOnError) })
	return r, nil
}

// electionResolver is the resolver.Resolver of one client of one election.
type electionResolver struct {
	name     string
	cc       resolver.ClientConn
	clock    clocks.Clock
	log      *slog.Logger
	decider  leaderelection.RaceDecider
	store    string // names decider in errors
	poll     time.Duration
	noConfig bool // the client disabled service configs from resolvers

	// readTimeout bounds one read of the resolver's own (at start, for
	// ResolveNow, after a refusal); resolveSpacer is the least time
	// between two made for ResolveNow.
	readTimeout, resolveSpacer time.Duration
	// poke asks the refresh goroutine for a read (buffered: a request made
	// while one is pending is merged with it).
	poke chan struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu serialises updates to gRPC and guards the fields below.
	mu sync.Mutex
	// rec is the newest record seen (RaceEntry.NewerThan), from the watcher
	// or a read of our own; nil before the first.
	rec *entry.RaceEntry
	// expired: rec's term ran out, as the watcher reported or as our clock
	// said (when rec arrived, or at its expiry: see ender).
	expired bool
	// deleted: the watcher reported the record deleted, and nothing newer
	// has come since.
	deleted bool
	// stopped is the error that stopped the watcher (a refusal), until
	// the store answers a read again: rec may be out of date meanwhile.
	stopped error
	// failing is the error of the last read of the record while reads
	// fail (the watcher's, seen through its Observer, or one of our own),
	// nil once one is answered. While no leader is known it says why no
	// newer record is (a record turned corrupt, a store that times out).
	failing error
	// answers counts the reads of the record that were answered (the
	// watcher's, seen through its Observer, and our own). wake, while
	// refresh waits to retry its first read and no record is known, ends
	// that wait: another read was answered, so the store is back, and
	// refresh reads at once rather than leave gRPC with the error of its
	// failed read until its backoff (up to a minute) runs out. Only
	// refresh sets it, in readUntilAnswered.
	answers uint64
	wake    context.CancelFunc
	// ender ends rec at its expiry and reads the record again then: rec
	// may have come from a read of our own, which the watcher has not seen
	// and will not report ended.
	ender clocks.StopTimer
	// ctx is the resolver's: it ends at Close. closed is set (under mu)
	// before Close waits for the goroutines, so that none starts after.
	ctx    context.Context
	closed bool
	// pushed describes the state last handed to gRPC ("" for none yet;
	// starting with noLeader for an error), so that an extension, which
	// changes nothing a client uses, is not handed over again.
	pushed string
	// configs caches parsed service configs by their JSON: a leader
	// publishes the same one with every extension.
	configs map[string]*serviceconfig.ParseResult
}

// ResolveNow implements resolver.Resolver. gRPC calls it when a connection
// to the leader fails, which is when a change of leader is likeliest. It asks
// for a read of the record now, rather than at the watcher's next poll (on a
// Decider that pushes changes too: a push channel that went silent without
// failing is found only later). Reads made for ResolveNow are spaced at least
// a quarter of the WatchConfig's PollInterval apart, however often gRPC asks.
func (r *electionResolver) ResolveNow(resolver.ResolveNowOptions) {
	select {
	case r.poke <- struct{}{}:
	default: // a read is already due
	}
}

// Close implements resolver.Resolver: it stops the watcher and waits for
// every goroutine the resolver started.
func (r *electionResolver) Close() {
	r.mu.Lock()
	r.closed = true
	if r.ender != nil {
		r.ender.Stop()
	}
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// refresh reads the record at start, until a read succeeds (the watcher
// reports nothing until somebody is elected, but a client must learn that
// nobody is, rather than keep the error of a failed first read), then once
// per ResolveNow request, no more often than resolveSpacer.
func (r *electionResolver) refresh(ctx context.Context, b backoff.Backoff) {
	// The watcher retries and reports its own failures; these only matter
	// while the client knows nothing yet.
	if !r.readUntilAnswered(ctx, &b, r.readFailed, true) {
		return
	}
	for {
		if !r.clock.SleepFor(ctx, r.resolveSpacer) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-r.poke:
		}
		rctx, cancel := r.clock.ContextWithTimeout(ctx, r.readTimeout)
		rec, err := r.decider.ReadCurrent(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.readFailed(r.readDone(err))
		case rec != nil:
			r.offer(rec)
		}
	}
}

// follow runs the watcher until ctx ends. Watch returns before that only
// when the store refuses (ErrRefused: permission denied, a missing bucket).
// A refusal may yet heal (RBAC that reaches a pod after it starts, a bucket
// created late) and a resolver cannot end its client: so the refusal is
// reported, the record is read at capped, jittered, growing intervals until
// the store answers, and the watcher starts again.
func (r *electionResolver) follow(ctx context.Context, b backoff.Backoff, cfg leaderelection.WatchConfig, onError func(context.Context, error)) {
	for {
		began := r.clock.Now()
		err := cfg.Watch(ctx, func(_ context.Context, c leaderelection.Change) {
			r.watched(c)
		})
		if ctx.Err() != nil {
			return
		}
		if r.clock.Now().Sub(began) >= b.Max {
			b.Reset() // the store answered for a while: a new failure
		}
		stop := func(err error) {
			err = fmt.Errorf("legrpc: election %q: the watcher stopped; reading again with backoff: %w", r.name, err)
			level := slog.LevelWarn
			if errors.Is(err, leaderelection.ErrRefused) {
				level = slog.LevelError
			}
			r.log.Log(ctx, level, "cannot follow the election", "err", err)
			r.stop(err)
			if onError != nil {
				onError(ctx, err)
			}
		}
		stop(err)
		if !r.clock.SleepFor(ctx, b.Next()) || !r.readUntilAnswered(ctx, &b, stop, false) {
			return
		}
	}
}

// readUntilAnswered reads the record until a read succeeds and hands gRPC
// what it found. failed is told of each failure, which is followed by a wait
// from b. With early (refresh's first reads), the wait ends as soon as
// another read is answered while no record is known (see
// electionResolver.wake), or is skipped if one was while the failed read was
// in flight. It returns false if ctx ended first.
func (r *electionResolver) readUntilAnswered(ctx context.Context, b *backoff.Backoff, failed func(error), early bool) bool {
	for {
		seen := r.answered()
		rctx, cancel := r.clock.ContextWithTimeout(ctx, r.readTimeout)
		rec, err := r.decider.ReadCurrent(rctx)
		cancel()
		if err == nil && rec == nil {
			err = errors.New("the Decider's ReadCurrent returned no record and no error")
		}
		switch {
		case ctx.Err() != nil:
			return false
		case err == nil:
			r.offer(rec)
			return true
		}
		failed(r.readDone(err))
		// The wait is a SleepFor whatever ends it, so that a fake clock
		// counts it among its sleepers, as it does the others.
		wait, stop := ctx, context.CancelFunc(func() {})
		if early {
			wait, stop = r.untilAnswered(ctx, seen)
		}
		d := b.Next()
		slept := wait.Err() == nil && r.clock.SleepFor(wait, d)
		stop()
		if !slept && ctx.Err() != nil {
			return false
		}
	}
}

// answered returns how many reads have been answered so far.
func (r *electionResolver) answered() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answers
}

// untilAnswered returns a context that ends with ctx, or once a read is
// answered while no record is known: at once if one was since answered
// returned seen. stop, which the caller must call when its wait is over,
// releases it. Only one goroutine (refresh) waits so at a time.
func (r *electionResolver) untilAnswered(ctx context.Context, seen uint64) (wait context.Context, stop context.CancelFunc) {
	wait, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answers != seen && r.rec == nil {
		cancel()
	} else {
		r.wake = cancel
	}
	return wait, func() {
		r.mu.Lock()
		r.wake = nil
		r.mu.Unlock()
		cancel()
	}
}

// stop records the error that stopped the watcher and hands it to gRPC, so
// that calls fail with it. A connection to a leader already known is kept
// (gRPC ignores a resolver's error while it has addresses), until the
// leader's term ends as the resolver last knew it.
func (r *electionResolver) stop(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = err
	if r.pushed != "" && !strings.HasSuffix(r.pushed, stoppedMark) {
		// gRPC's error is now this one: hand it the state again once
		// the store answers, even if unchanged. (The prefix, which
		// updateLocked reads, is kept.)
		r.pushed += stoppedMark
	}
	r.cc.ReportError(err)
}

// stoppedMark ends electionResolver.pushed once gRPC was told of an error
// that stopped the watcher.
const stoppedMark = "\x00stopped"

// retryCap caps the resolver's waits between reads of a store that fails
// (unless the PollInterval is longer): a refusal can take minutes to heal,
// and then the client follows the election again within a minute.
const retryCap = time.Minute

// newBackoff spaces out the resolver's retries, so that clients refused
// together do not read together. It starts at the poll interval: no sooner
// than the watcher reads. Under a seeded source (hooks.WithRand in the
// Builder's base context) each backoff gets a source of its own drawn from it
// (before the watcher starts, which draws from it too), so that a simulated
// run replays whatever order the resolver's goroutines draw in.
func (r *electionResolver) newBackoff(base context.Context) backoff.Backoff {
	b := backoff.Backoff{Min: r.poll, Max: max(r.poll, retryCap)}
	if src := hooks.Rand(base); src != nil {
		rnd := rand.New(rand.NewPCG(src.Uint64(), src.Uint64()))
		b.Jitter = func(d time.Duration) time.Duration { return time.Duration(rnd.Int64N(int64(d) + 1)) }
	}
	return b
}

// watched merges a change the watcher reports. The change may be one the
// resolver has already learnt from a read of its own.
func (r *electionResolver) watched(c leaderelection.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.Kind != leaderelection.TermExpired {
		// Read or pushed: the store answered. (An expiry may come from
		// the watcher's clock alone.)
		r.failing = nil
	}
	if c.Kind == leaderelection.RecordDeleted {
		// Nobody leads until a new record is written; the next one, from
		// the watcher or a read of our own, replaces the absence.
		r.takeLocked(&entry.RaceEntry{ElectionNumber: entry.NoElections}, false)
		r.deleted = true
		r.stopped = nil
		r.updateLocked()
		return
	}
	r.offerLocked(&c.Entry, c.Kind == leaderelection.TermExpired)
}

// offer merges a record the resolver read itself.
func (r *electionResolver) offer(rec *entry.RaceEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readDoneLocked(nil)
	r.offerLocked(rec, false)
}

// offerLocked merges a record into the resolver's state and hands gRPC the
// result if it changed. Records arrive from two goroutines, and one may be
// behind the other: only a newer record (RaceEntry.NewerThan, the order Watch
// reports in, which holds across a deletion) replaces the one held.
// expired reports that rec's term has run out (the watcher's TermExpired).
// A record offered means the store answered: a stopped watcher's error, which
// gRPC holds, is replaced by the state.
func (r *electionResolver) offerLocked(rec *entry.RaceEntry, expired bool) {
	answered := r.stopped != nil
	r.stopped = nil
	switch {
	case r.rec == nil || rec.NewerThan(r.rec):
		r.takeLocked(rec, expired)
	case rec.Term == r.rec.Term && rec.ElectionNumber == r.rec.ElectionNumber && !r.expired &&
		(expired || !rec.Released && rec.ElectionNumber != entry.NoElections && !r.clock.Now().Before(rec.TermExpiry)):
		// The watcher reported the expiry, or a read at or after it
		// found the record not extended.
		r.expired = true
	case answered:
		// Hand gRPC the state again, in place of the error.
	default:
		return
	}
	r.updateLocked()
}

// takeLocked makes rec the record the resolver stands for. A record read
// after its expiry (a leader that crashed before this client started, say)
// names nobody to call. A live one is ended at its expiry
// by a timer of our own, which also reads the record then, so that an
// extension the watcher has not yet seen is followed a round trip later:
// the watcher may never report the record ended (it came from our own read,
// and the watcher's next read may find a newer one), and routing must not
// outlive the term it knows of.
func (r *electionResolver) takeLocked(rec *entry.RaceEntry, expired bool) {
	r.rec = rec.Clone()
	r.deleted = false
	if r.ender != nil {
		r.ender.Stop()
		r.ender = nil
	}
	live := rec.ElectionNumber != entry.NoElections && !rec.Released
	r.expired = expired || (live && !r.clock.Now().Before(rec.TermExpiry))
	if !live || r.expired {
		return
	}
	held := r.rec
	r.ender = r.clock.AfterFunc(r.clock.Until(rec.TermExpiry), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed || r.rec != held {
			return
		}
		// Read before ending the term: a leader that extended on time,
		// in a poll gap the watcher has yet to read (a PollInterval over
		// TermLength/2, an extension retried late), is followed without
		// dropping the clients' connections to it. Routing outlives the
		// term by this one read at most.
		r.wg.Go(func() {
			rctx, cancel := r.clock.ContextWithTimeout(r.ctx, min(r.readTimeout, enderRead))
			rec, err := r.decider.ReadCurrent(rctx)
			cancel()
			r.mu.Lock()
			defer r.mu.Unlock()
			if !r.closed {
				r.readDoneLocked(err)
			}
			switch {
			case r.closed:
			case err == nil && rec != nil && rec.NewerThan(r.rec):
				// (Newer than what the watcher may have brought
				// meanwhile, too.)
				r.offerLocked(rec, false)
			case r.rec == held && !r.expired:
				r.expired = true
				r.updateLocked()
			}
		})
	})
}

// maxReadTimeout caps the resolver's own reads (as watchers cap theirs),
// however long the PollInterval: a read that hangs (a connection
// black-holed) must be abandoned and retried, not leave the client with
// what it knew before for a whole PollInterval.
const maxReadTimeout = 10 * time.Second

// enderRead bounds the read made at a term's expiry, for which routing
// outlives the term.
const enderRead = time.Second

// readFailed reports a failed read to gRPC while the client has nothing
// better, so that calls that do not wait for ready fail with the cause
// instead of waiting for a first resolution that may not come.
func (r *electionResolver) readFailed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rec == nil {
		r.cc.ReportError(fmt.Errorf("legrpc: election %q: %w", r.name, err))
	}
}

// readDone takes note of a read's outcome (err nil when answered), and
// returns err naming the store.
func (r *electionResolver) readDone(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readDoneLocked(err)
}

func (r *electionResolver) readDoneLocked(err error) error {
	if err != nil {
		err = fmt.Errorf("reading %s: %w", r.store, err)
	} else {
		r.answers++
		if r.wake != nil && r.rec == nil {
			// The store is back: refresh reads now, to tell gRPC
			// what it holds in place of its failed read's error.
			r.wake()
			r.wake = nil
		}
	}
	was := failClass(r.failing)
	r.failing = err
	if failClass(err) != was && strings.HasPrefix(r.pushed, noLeader) {
		// gRPC's error gains, or loses, the cause.
		r.updateLocked()
	}
	return err
}

// failClass sorts read errors for electionResolver.pushed, so that gRPC is
// told again when the kind of failure changes, not at every failed read
// (whose errors may each carry a request id).
func failClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, entry.ErrCorruptRecord):
		return "\x00corrupt"
	case errors.Is(err, leaderelection.ErrRefused):
		return "\x00refused"
	}
	return "\x00failing"
}

// noLeader starts electionResolver.pushed when gRPC was told of no leader.
const noLeader = "\x00no leader: "

// updateLocked hands gRPC the state r.rec stands for, unless it already has it.
func (r *electionResolver) updateLocked() {
	rec := r.rec
	// An empty entry is no way to the leader: gRPC would dial "".
	hostPorts := slices.DeleteFunc(slices.Clone(rec.HostPort), func(hp string) bool { return hp == "" })
	var why string
	switch {
	case rec.ElectionNumber == entry.NoElections && r.deleted:
		why = "the election record was deleted"
	case rec.ElectionNumber == entry.NoElections:
		why = "nobody has been elected yet"
	case rec.Released:
		why = fmt.Sprintf("%s released term %d", rec.LeaderID, rec.Term)
	case r.expired:
		why = fmt.Sprintf("term %d of %s expired at %s", rec.Term, rec.LeaderID, rec.TermExpiry.Format(time.RFC3339Nano))
	case len(hostPorts) == 0:
		why = fmt.Sprintf("leader %s (term %d) publishes no address", rec.LeaderID, rec.Term)
	}
	if why != "" {
		key := noLeader + why
		if r.stopped != nil {
			// The error gRPC gets carries the refusal: once the store
			// answers, the same state is handed over again without it.
			key += stoppedMark
		} else {
			key += failClass(r.failing)
		}
		if r.pushed == key {
			return
		}
		r.log.Debug("no leader to route to", "why", why)
		if r.pushed != "" && !strings.HasPrefix(r.pushed, noLeader) {
			// Zero addresses make the balancer drop its connection to
			// the former leader (an error alone would not). It returns
			// ErrBadResolverState, which a watching resolver may ignore.
			_ = r.cc.UpdateState(resolver.State{})
		}
		r.pushed = key
		// The error is what calls that do not wait for ready fail with.
		err := fmt.Errorf("%w %q: %s", ErrNoLeader, r.name, why)
		switch {
		case r.stopped != nil:
			// A newer record may exist: say why none is known.
			err = fmt.Errorf("%w (%w)", err, r.stopped)
		case r.failing != nil:
			err = fmt.Errorf("%w (and %w)", err, r.failing)
		}
		r.cc.ReportError(err)
		return
	}

	sc := r.serviceConfigLocked(rec)
	key := strings.Join(hostPorts, ",") + "\x00" + string(rec.ConnectionParams)
	if r.pushed == key {
		return
	}
	r.pushed = key
	addrs := make([]resolver.Address, len(hostPorts))
	for i, hp := range hostPorts {
		addrs[i] = resolver.Address{Addr: hp}
	}
	r.log.Debug("routing to the leader", "leader_id", rec.LeaderID, "term", rec.Term, "addresses", hostPorts)
	// One endpoint: the addresses are all ways to the one leader.
	err := r.cc.UpdateState(resolver.State{
		Addresses:     addrs,
		Endpoints:     []resolver.Endpoint{{Addresses: slices.Clone(addrs)}},
		ServiceConfig: sc,
	})
	if err != nil {
		r.log.Warn("gRPC rejected the leader's addresses", "leader_id", rec.LeaderID, "addresses", hostPorts, "err", err)
	}
}

// serviceConfigLocked returns the service config rec publishes, or nil when
// it publishes none or one that does not parse. gRPC keeps the config it has
// when handed nil (or applies the client's default if it has none), so a bad
// config from one leader cannot cut clients off from it.
func (r *electionResolver) serviceConfigLocked(rec *entry.RaceEntry) *serviceconfig.ParseResult {
	if r.noConfig || len(rec.ConnectionParams) == 0 {
		return nil
	}
	js := string(rec.ConnectionParams)
	sc, ok := r.configs[js]
	if !ok {
		sc = r.cc.ParseServiceConfig(js)
		if sc.Err != nil {
			r.log.Warn("ignoring the service config the leader publishes", "leader_id", rec.LeaderID, "err", sc.Err)
		}
		// Keep only the newest: leaders rarely change theirs.
		clear(r.configs)
		r.configs[js] = sc
	}
	if sc.Err != nil {
		return nil
	}
	return sc
}
