// Package demo runs the leader-election demonstration that "go run
// ./cmd/demo" and "leaderelect demo" print: candidates campaign on an
// in-memory store inside one process, and a scripted story shows an election,
// extensions, a leader that pauses past its term (and whose late write the
// fencing token stops), a crash, a restart and a clean hand-over.
//
// It imports only the engine and the memory backend, so that the first
// command a newcomer runs downloads and builds little.
//
// Safety model shown: a leader acts only while its TimeView says its term
// has not ended; a successor waits for the term's end plus the max clock
// skew; a leader that paused past that is stopped downstream by its smaller
// fencing token. The demo checks at every election that no earlier leader
// still held a valid term, and reports a violation otherwise.
package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/memory"
)

// Description says what the demo shows, for a command's --help.
const Description = `
Runs an election among candidates inside this process, on an in-memory
store, and prints what happens as it happens: elections, extensions, a
leader that pauses (and is fenced off when it wakes), a leader that crashes,
a restart, a clean shutdown. It ends by itself after about five terms
(about 20s by default) with a summary.

Each leader writes to a pretend downstream store with its fencing token;
that store refuses a token smaller than one it has seen, which is what
protects it from a leader that paused past the end of its term.
`

// Synopsis is the demo's flags in one line.
const Synopsis = "[--term 4s] [--skew D] [--candidates 3]"

// Options is one run's timing and size.
type Options struct {
	Term, Skew time.Duration
	Candidates int
}

// Bind defines the demo's flags on fs, with their defaults, setting o.
// Call Check once fs has been parsed.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.DurationVar(&o.Term, "term", 4*time.Second, "the term length; the whole demo lasts about five terms")
	fs.DurationVar(&o.Skew, "skew", 0, "the max clock skew (default term/8)")
	fs.IntVar(&o.Candidates, "candidates", 3, "how many candidates campaign (2 to 9)")
}

// Check fills in the defaults that depend on other flags of fs and returns
// what is wrong with o, one problem per string.
func (o *Options) Check(fs *flag.FlagSet) []string {
	skewSet := false
	fs.Visit(func(f *flag.Flag) { skewSet = skewSet || f.Name == "skew" })
	if !skewSet {
		o.Skew = o.Term / 8
	}
	var p []string
	switch {
	case o.Term < time.Millisecond:
		p = append(p, fmt.Sprintf("--term (%s) must be at least 1ms", o.Term))
	case o.Skew < 0:
		p = append(p, fmt.Sprintf("--skew (%s) must not be negative", o.Skew))
	case o.Term-o.Skew <= o.Skew: // o.Term <= 2*o.Skew, without the overflow
		p = append(p, fmt.Sprintf("--term (%s) must be greater than 2 x --skew (%s); 4 x or more is recommended", o.Term, o.Skew))
	}
	if o.Candidates < 2 || o.Candidates > 9 {
		p = append(p, fmt.Sprintf("--candidates (%d) must be from 2 to 9", o.Candidates))
	}
	return p
}

// demo is one run of the demonstration.
type demo struct {
	Options
	out   io.Writer
	start time.Time
	store *memory.Decider
	// patience bounds every wait of the scenario for the election to move.
	patience time.Duration

	changes chan leaderelection.Change // from the watcher, to the scenario

	wg sync.WaitGroup // every candidate's Acquire

	mu sync.Mutex // guards everything below, and the output
	// last is the change printed last, to say how a new leader came in.
	last       *leaderelection.Change
	tenures    []*demoTenure
	violations []string
	// The downstream store: it accepts a write whose token is at least the
	// highest it has seen.
	highest            int64
	accepted           int
	rejected           []string
	ledgerChanged      chan struct{}
	pauseTakeover      time.Duration
	crashAt, expiredAt time.Time
	crashTakeover      [2]time.Duration // after the crash, after the term's end
	releasedAt         time.Time
	leaving            string    // the leader that shuts down cleanly
	shutdownAt         time.Time // when it was told to
	handover           time.Duration
	elections          []string
}

type demoTenure struct {
	id    string
	term  int64
	tv    *leaderelection.TimeView
	ended bool
}

// demoNode is one incarnation of a candidate.
type demoNode struct {
	name, id string
	access   *cutDecider
	cancel   context.CancelFunc
	done     chan struct{}
	// pause, once closed, has the node's worker freeze right after its next
	// check of its term, until resume is closed; paused is closed then.
	pause, paused, resume chan struct{}
}

// Run runs the demo, printing to out as it goes, and reports whether the
// safety check passed. It returns an error if the election did not move as
// the story needs within a few terms, or ctx's error once ctx is done.
func Run(ctx context.Context, out io.Writer, o Options) (bool, error) {
	d := &demo{
		Options:       o,
		out:           out,
		start:         time.Now(),
		store:         memory.NewDecider(),
		patience:      4*o.Term + 4*o.Skew,
		changes:       make(chan leaderelection.Change, 10000),
		highest:       -1,
		ledgerChanged: make(chan struct{}),
	}
	d.intro()

	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		_ = leaderelection.WatchConfig{Decider: d.store, MaxClockSkew: o.Skew, PollInterval: o.Term / 4}.
			Watch(watchCtx, d.onChange)
	}()

	nodes := map[string]*demoNode{}
	for i := 1; i <= o.Candidates; i++ {
		name := fmt.Sprintf("node-%d", i)
		nodes[name] = d.startNode(ctx, name, name)
	}
	err := d.scenario(ctx, nodes)

	// Stop whoever is left; the leader releases.
	for _, n := range nodes {
		n.cancel()
	}
	d.wg.Wait()
	if err == nil {
		_, err = d.await(ctx, "the last release", func(c leaderelection.Change) bool {
			return c.Kind == leaderelection.LeaderReleased
		})
	}
	stopWatch()
	<-watchDone
	if err != nil {
		return false, err
	}
	d.summary()
	return len(d.violations) == 0, nil
}

func (d *demo) intro() {
	fmt.Fprintf(d.out, `Leader election demo: %d candidates campaign for one lease on an in-memory store.
  Term %s: the leader extends it every %s. If it stops extending, the others wait
  for the term to end plus the max clock skew (%s) before one takes over.
  Fencing token: grows with every new leader; the downstream store refuses any
  token smaller than the largest it has seen.

   time  who        event             details
`, d.Candidates, durationText(d.Term), durationText(d.Term/2), durationText(d.Skew))
}

// at is the time since the demo started, for the timeline.
func (d *demo) at(t time.Time) string {
	return fmt.Sprintf("%6.2fs", t.Sub(d.start).Seconds())
}

// line prints one timeline line; d.mu must be held.
func (d *demo) line(who, event, format string, args ...any) {
	fmt.Fprintf(d.out, "%s  %-9s  %-16s  %s\n", d.at(time.Now()), who, event, fmt.Sprintf(format, args...))
}

func (d *demo) say(who, event, format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.line(who, event, format, args...)
}

// onChange prints what the watcher saw and passes it to the scenario.
func (d *demo) onChange(ctx context.Context, c leaderelection.Change) {
	d.mu.Lock()
	now := time.Now()
	e := c.Entry
	until := fmt.Sprintf("term until %s", strings.TrimSpace(d.at(e.TermExpiry)))
	switch c.Kind {
	case leaderelection.LeaderElected:
		how := "elected"
		if d.last != nil {
			switch d.last.Kind {
			case leaderelection.TermExpired:
				gap := now.Sub(d.last.Entry.TermExpiry)
				how = fmt.Sprintf("took over %s after %s's term ended", durationText(gap), d.last.Entry.LeaderID)
				d.expiredAt = d.last.Entry.TermExpiry
			case leaderelection.LeaderReleased:
				how = fmt.Sprintf("took over %s after the release", durationText(now.Sub(d.releasedAt)))
			default:
				// A release taken over at once can be replaced before
				// the watcher reads it: only the new leader is seen.
				if d.leaving != "" && d.last.Entry.LeaderID == d.leaving {
					how = fmt.Sprintf("took over %s after %s shut down and released", durationText(now.Sub(d.shutdownAt)), d.leaving)
				}
			}
		}
		d.elections = append(d.elections, fmt.Sprintf("%s (%d)", e.LeaderID, e.Term))
		d.line(e.LeaderID, "ELECTED", "%s; fencing token %d, %s", how, e.Term, until)
	case leaderelection.TermExtended:
		d.line(e.LeaderID, "extended", "%s", until)
	case leaderelection.LeaderReleased:
		d.releasedAt = now
		d.line(e.LeaderID, "released", "stepped down: anyone may take over at once")
	case leaderelection.TermExpired:
		d.line(e.LeaderID, "term ended", "no extension came; the others wait %s more (max clock skew)", durationText(d.Skew))
	}
	d.last = &c
	d.mu.Unlock()
	select {
	case d.changes <- c:
	case <-ctx.Done():
	}
}

// await consumes changes until one satisfies ok.
func (d *demo) await(ctx context.Context, what string, ok func(leaderelection.Change) bool) (leaderelection.Change, error) {
	deadline := time.NewTimer(d.patience)
	defer deadline.Stop()
	for {
		select {
		case c := <-d.changes:
			if ok(c) {
				return c, nil
			}
		case <-deadline.C:
			return leaderelection.Change{}, fmt.Errorf("the election did not reach %s within %v", what, d.patience)
		case <-ctx.Done():
			return leaderelection.Change{}, ctx.Err()
		}
	}
}

func (d *demo) awaitElected(ctx context.Context, after int64) (leaderelection.Change, error) {
	return d.await(ctx, "a new election", func(c leaderelection.Change) bool {
		return c.Kind == leaderelection.LeaderElected && c.Entry.Term > after
	})
}

func (d *demo) awaitExtended(ctx context.Context, term int64) error {
	_, err := d.await(ctx, "an extension", func(c leaderelection.Change) bool {
		return c.Kind == leaderelection.TermExtended && c.Entry.Term == term
	})
	return err
}

func nodeOf(nodes map[string]*demoNode, id string) *demoNode {
	for _, n := range nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func (d *demo) scenario(ctx context.Context, nodes map[string]*demoNode) error {
	first, err := d.awaitElected(ctx, -1)
	if err != nil {
		return err
	}
	for range 2 {
		if err := d.awaitExtended(ctx, first.Entry.Term); err != nil {
			return err
		}
	}

	// A leader pauses right after checking its term: it can neither extend
	// nor notice its term ending. The others take over after the term and
	// the skew; when it wakes, its write carries a stale token.
	paused := nodeOf(nodes, first.Entry.LeaderID)
	paused.access.cut.Store(true)
	close(paused.pause)
	select {
	case <-paused.paused:
	case <-ctx.Done():
		return ctx.Err()
	}
	second, err := d.awaitElected(ctx, first.Entry.Term)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.pauseTakeover = time.Since(d.expiredAt)
	d.mu.Unlock()
	if err := d.awaitLedger(ctx, second.Entry.Term); err != nil {
		return err
	}
	paused.access.cut.Store(false)
	close(paused.resume)

	// The new leader crashes: no release, so the others wait for its term
	// to end.
	if err := d.awaitExtended(ctx, second.Entry.Term); err != nil {
		return err
	}
	crashed := nodeOf(nodes, second.Entry.LeaderID)
	crashed.access.cut.Store(true)
	crashed.cancel()
	d.mu.Lock()
	d.crashAt = time.Now()
	d.line(crashed.id, "CRASHES", "no release: the others must wait for its term to end")
	d.mu.Unlock()
	third, err := d.awaitElected(ctx, second.Entry.Term)
	if err != nil {
		return err
	}
	d.mu.Lock()
	now := time.Now()
	d.crashTakeover = [2]time.Duration{now.Sub(d.crashAt), now.Sub(d.expiredAt)}
	d.mu.Unlock()

	// It comes back as a new incarnation, with a new id.
	<-crashed.done
	restarted := d.startNode(ctx, crashed.name, crashed.name+"#2")
	nodes[crashed.name] = restarted
	d.say(restarted.id, "restarts", "%s comes back with a new id and campaigns", crashed.name)

	// A clean shutdown hands over at once.
	if err := d.awaitExtended(ctx, third.Entry.Term); err != nil {
		return err
	}
	leaving := nodeOf(nodes, third.Entry.LeaderID)
	d.mu.Lock()
	d.leaving, d.shutdownAt = leaving.id, time.Now()
	d.line(leaving.id, "SHUTS DOWN", "cleanly: stops working, then releases its term")
	d.mu.Unlock()
	leaving.cancel()
	fourth, err := d.awaitElected(ctx, third.Entry.Term)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.handover = time.Since(d.shutdownAt)
	d.mu.Unlock()
	if err := d.awaitExtended(ctx, fourth.Entry.Term); err != nil {
		return err
	}
	d.say("", "the end", "stopping every candidate")
	return nil
}

func (d *demo) startNode(ctx context.Context, name, id string) *demoNode {
	ctx, cancel := context.WithCancel(ctx)
	n := &demoNode{
		name: name, id: id,
		access: &cutDecider{Decider: d.store},
		cancel: cancel,
		done:   make(chan struct{}),
		pause:  make(chan struct{}), paused: make(chan struct{}), resume: make(chan struct{}),
	}
	cfg := leaderelection.Config{
		Decider:      n.access,
		LeaderID:     id,
		TermLength:   d.Term,
		MaxClockSkew: d.Skew,
		OnElected:    d.work(n),
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(n.done)
		if err := cfg.Acquire(ctx); err != nil && !errors.Is(err, context.Canceled) {
			d.say(id, "error", "%v", err)
		}
	}()
	return n
}

// work is a node's OnElected: it checks the safety invariant, then writes to
// the downstream store a few times per term, checking its term before each
// write as a leader must.
func (d *demo) work(n *demoNode) func(ctx context.Context, tv *leaderelection.TimeView) {
	return func(ctx context.Context, tv *leaderelection.TimeView) {
		t := &demoTenure{id: n.id, term: tv.Term(), tv: tv}
		d.mu.Lock()
		for _, o := range d.tenures {
			if !o.ended && o.tv.ValueInFuture() {
				v := fmt.Sprintf("%s elected (token %d) while %s (token %d) still held a valid term", n.id, t.term, o.id, o.term)
				d.violations = append(d.violations, v)
				d.line(n.id, "VIOLATION", "%s", v)
			}
		}
		d.tenures = append(d.tenures, t)
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			t.ended = true
			d.mu.Unlock()
		}()

		tick := time.NewTicker(d.Term / 4)
		defer tick.Stop()
		for first := true; ; first = false {
			// Every write, the first included, follows a check of the
			// term; the pause comes between the two.
			if !first {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
			if !tv.ValueInFuture() {
				return
			}
			if isClosed(n.pause) && !isClosed(n.resume) {
				d.say(n.id, "PAUSES", "right after checking its term (a long GC pause, a frozen VM): no more extensions")
				close(n.paused)
				<-n.resume
			}
			d.write(n.id, tv.Term())
		}
	}
}

// write is a write to the downstream store, fenced by token.
func (d *demo) write(id string, token int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if token < d.highest {
		d.rejected = append(d.rejected, fmt.Sprintf("token %d from %s", token, id))
		d.line(id, "wakes, writes", "downstream REJECTS token %d: it has seen token %d", token, d.highest)
		return
	}
	d.accepted++
	if token > d.highest {
		d.highest = token
		close(d.ledgerChanged)
		d.ledgerChanged = make(chan struct{})
	}
}

// awaitLedger waits until the downstream store has seen token.
func (d *demo) awaitLedger(ctx context.Context, token int64) error {
	deadline := time.NewTimer(d.patience)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		seen, changed := d.highest, d.ledgerChanged
		d.mu.Unlock()
		if seen >= token {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("the downstream store did not see token %d within %v", token, d.patience)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (d *demo) summary() {
	d.mu.Lock()
	defer d.mu.Unlock()
	safe := "yes (checked at every election)"
	if len(d.violations) > 0 {
		safe = fmt.Sprintf("NO: %s", strings.Join(d.violations, "; "))
	}
	fmt.Fprintf(d.out, `
Summary after %s:
  elections (fencing token):       %s
  at most one leader at a time:    %s
  takeover after a pause:          %s after the term ended (max clock skew %s, plus jitter)
  takeover after a crash:          %s after the crash, %s after the term ended
  handover after a clean shutdown: %s from the shutdown to the next leader
  downstream writes:               %d accepted, %d rejected (%s)
`,
		durationText(time.Since(d.start)),
		strings.Join(d.elections, ", "),
		safe,
		durationText(d.pauseTakeover), durationText(d.Skew),
		durationText(d.crashTakeover[0]), durationText(d.crashTakeover[1]),
		durationText(d.handover),
		d.accepted, len(d.rejected), strings.Join(d.rejected, ", "))
}

// cutDecider is one node's access to the shared store; cutting it stands for
// a process that is paused or dead and so sends nothing.
type cutDecider struct {
	*memory.Decider
	cut atomic.Bool
}

var errCut = errors.New("demo: this node cannot reach the store")

func (c *cutDecider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.Decider.ReadCurrent(ctx)
}

func (c *cutDecider) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	if c.cut.Load() {
		return entry.LeaderToken{}, errCut
	}
	return c.Decider.WriteEntry(ctx, e)
}

func (c *cutDecider) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.Decider.WaitForChange(ctx, tok)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// durationText formats d for people: 1.50s, 250ms, 2m0s.
func durationText(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + durationText(-d)
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	}
	return d.Round(time.Millisecond).String()
}
