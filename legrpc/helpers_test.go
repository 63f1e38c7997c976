package legrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/legrpc"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// Timing of the end-to-end tests. They run over real sockets, so in real
// time: a short term keeps a crash takeover around a second.
const (
	testTerm = time.Second
	testSkew = 100 * time.Millisecond
	// patience bounds every wait for something the election or gRPC must
	// do; generous, for loaded machines and the race detector.
	patience = 10 * time.Second
	// callTimeout is the deadline of each client call. It covers a crash
	// takeover (a term and the skew), during which calls wait for a leader.
	callTimeout = 5 * time.Second
)

var errCut = errors.New("test: store access cut")

// cuttable is one process's access to the shared store, which a test can cut
// to simulate a crash (or a partition) of that process.
type cuttable struct {
	leaderelection.RaceDecider
	cut atomic.Bool
}

func (c *cuttable) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.RaceDecider.ReadCurrent(ctx)
}

func (c *cuttable) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	if c.cut.Load() {
		return entry.LeaderToken{}, errCut
	}
	return c.RaceDecider.WriteEntry(ctx, e)
}

// pushingCuttable forwards change notifications of a store that pushes.
type pushingCuttable struct{ *cuttable }

func (p pushingCuttable) WaitForChange(ctx context.Context, tok entry.LeaderToken) (*entry.RaceEntry, error) {
	if p.cut.Load() {
		return nil, errCut
	}
	return p.RaceDecider.(leaderelection.ChangeNotifier).WaitForChange(ctx, tok)
}

// served is one call a server answered.
type served struct {
	term int64
	at   time.Time
}

// proc is one server process: a gRPC server on a loopback port, guarded by
// its candidate's leadership.
type proc struct {
	id    string
	addr  string
	srv   *grpc.Server
	guard *legrpc.Guard
	store *cuttable
	cfg   leaderelection.Config
	cand  *racedecidertest.Candidate

	rejected atomic.Int64 // calls its Guard rejected
	late     atomic.Int64 // calls admitted whose handler found the term over

	mu     sync.Mutex
	served map[string]served // by call id
}

// healthService answers Check with the health status, recording each call
// it serves under the call id the client puts in the request's Service.
type healthService struct {
	healthpb.UnimplementedHealthServer
	p *proc
}

func (h healthService) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	// Like any handler acting for the leader, check the term right before
	// acting: the Guard only checked it when the call arrived.
	tv, ok := legrpc.TimeViewFromContext(ctx)
	if !ok || !tv.ValueInFuture() {
		h.p.late.Add(1)
		return nil, status.Error(codes.Unavailable, "term over")
	}
	h.p.mu.Lock()
	h.p.served[req.GetService()] = served{term: tv.Term(), at: time.Now()}
	h.p.mu.Unlock()
	_ = grpc.SetHeader(ctx, metadata.Pairs("served-by", h.p.id))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// Watch sends SERVING, then holds the stream open until it ends: with the
// leadership, as the Guard cancels its context then.
func (h healthService) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if _, ok := legrpc.TimeViewFromContext(stream.Context()); !ok {
		return status.Error(codes.Internal, "stream admitted without a TimeView")
	}
	_ = stream.SetHeader(metadata.Pairs("served-by", h.p.id))
	if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return status.FromContextError(stream.Context().Err()).Err()
}

// cluster is several server processes campaigning on one store.
type cluster struct {
	t     testing.TB
	store leaderelection.RaceDecider
	mon   *racedecidertest.Monitor
	procs []*proc
}

// newCluster starts n servers and their candidates on store.
func newCluster(t testing.TB, store leaderelection.RaceDecider, n int) *cluster {
	c := &cluster{t: t, store: store, mon: racedecidertest.NewMonitor(t)}
	for i := range n {
		c.procs = append(c.procs, c.newProc(fmt.Sprintf("server-%d", i)))
	}
	for _, p := range c.procs {
		c.start(p)
	}
	return c
}

func (c *cluster) newProc(id string) *proc {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	p := &proc{id: id, addr: lis.Addr().String(), store: &cuttable{RaceDecider: c.store}, served: map[string]served{}}
	p.guard = &legrpc.Guard{OnReject: func(context.Context, string) { p.rejected.Add(1) }}
	p.srv = grpc.NewServer(
		grpc.UnaryInterceptor(p.guard.UnaryServerInterceptor()),
		grpc.StreamInterceptor(p.guard.StreamServerInterceptor()))
	healthpb.RegisterHealthServer(p.srv, healthService{p: p})
	go func() { _ = p.srv.Serve(lis) }()
	c.t.Cleanup(p.srv.Stop)

	var d leaderelection.RaceDecider = p.store
	if _, ok := c.store.(leaderelection.ChangeNotifier); ok {
		d = pushingCuttable{p.store}
	}
	p.cfg = p.guard.Attach(leaderelection.Config{
		Decider:          d,
		LeaderID:         id,
		HostPort:         []string{p.addr},
		ConnectionParams: []byte(legrpc.DefaultServiceConfig),
		TermLength:       testTerm,
		MaxClockSkew:     testSkew,
		OnElected:        c.mon.OnElected(id),
	})
	return p
}

// start starts p's candidate; stop stops it (releasing if it leads).
func (c *cluster) start(p *proc) {
	p.cand = racedecidertest.StartCandidate(context.Background(), p.cfg)
	c.t.Cleanup(func() { c.stop(p) })
}

func (c *cluster) stop(p *proc) {
	if p.cand != nil {
		p.cand.Stop(c.t)
		p.cand = nil
	}
}

func (c *cluster) proc(id string) *proc {
	for _, p := range c.procs {
		if p.id == id {
			return p
		}
	}
	c.t.Fatalf("no server %q", id)
	return nil
}

func (c *cluster) rejected() int64 {
	var n int64
	for _, p := range c.procs {
		n += p.rejected.Load()
	}
	return n
}

// result is one client call.
type result struct {
	worker   int
	id       string
	servedBy string
	err      error
	start    time.Time
	end      time.Time
	index    int // in the client's results
}

// client calls Check in a loop through a leaderelection:/// target.
type client struct {
	t    testing.TB
	conn *grpc.ClientConn

	mu      sync.Mutex
	results []result
	changed chan struct{} // closed and replaced after each call

	cancel context.CancelFunc
	done   chan struct{}
}

// newConn dials the election watched through wcfg.
func newConn(t testing.TB, wcfg leaderelection.WatchConfig, opts ...grpc.DialOption) *grpc.ClientConn {
	opts = append([]grpc.DialOption{
		grpc.WithResolvers(legrpc.NewBuilder(wcfg)),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Until a leader publishes it (and while none has), as the
		// package documentation recommends.
		grpc.WithDefaultServiceConfig(legrpc.DefaultServiceConfig),
	}, opts...)
	conn, err := grpc.NewClient(legrpc.Scheme+":///test-election", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// clientWorkers is how many goroutines of a client call concurrently, so that
// calls are in flight at every moment of a handover.
const clientWorkers = 4

// startClient starts calling through conn in a loop until stopped.
func startClient(t testing.TB, conn *grpc.ClientConn) *client {
	ctx, cancel := context.WithCancel(context.Background())
	c := &client{t: t, conn: conn, changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	hc := healthpb.NewHealthClient(conn)
	var wg sync.WaitGroup
	for w := range clientWorkers {
		wg.Go(func() { c.work(ctx, hc, w) })
	}
	go func() {
		wg.Wait()
		close(c.done)
	}()
	t.Cleanup(c.stop)
	return c
}

// work is one calling goroutine: one call at a time, so that its calls are
// ordered.
func (c *client) work(ctx context.Context, hc healthpb.HealthClient, worker int) {
	// Pace the loop a little so that, under the race detector, the
	// candidates' goroutines are not starved of CPU.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r := result{worker: worker, id: fmt.Sprintf("w%d-call-%d", worker, i), start: time.Now()}
		cctx, cancelCall := context.WithTimeout(ctx, callTimeout)
		var hdr metadata.MD
		_, r.err = hc.Check(cctx, &healthpb.HealthCheckRequest{Service: r.id}, grpc.Header(&hdr))
		cancelCall()
		r.end = time.Now()
		if ctx.Err() != nil {
			return // the call was cut short by stop: not a result
		}
		if v := hdr.Get("served-by"); len(v) == 1 {
			r.servedBy = v[0]
		}
		c.mu.Lock()
		r.index = len(c.results)
		c.results = append(c.results, r)
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
}

func (c *client) stop() {
	c.cancel()
	<-c.done
}

// mark returns a position in the results; waitServedBy looks after it.
func (c *client) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.results)
}

// waitServedBy waits for a successful call at or after mark (which may be
// ahead of the calls made so far) served by id, and returns it.
func (c *client) waitServedBy(mark int, id string) result {
	c.t.Helper()
	deadline := time.After(patience)
	for {
		c.mu.Lock()
		for ; mark < len(c.results); mark++ {
			if r := c.results[mark]; r.err == nil && r.servedBy == id {
				c.mu.Unlock()
				return r
			}
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			c.t.Fatalf("no call served by %s within %v", id, patience)
		}
	}
}

// snapshot returns the results so far.
func (c *client) snapshot() []result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]result(nil), c.results...)
}

// checkServed checks every successful call: it names the server that served
// it, that server recorded serving it while its TimeView was valid, and the
// fencing token never goes down from one call of a worker to its next (a
// worker calls one at a time, so a later call served by an older leader
// would be a bug).
// It returns the number of failed calls.
func (c *cluster) checkServed(results []result) (failed int) {
	c.t.Helper()
	lastTerm := map[int]int64{}
	for _, r := range results {
		if r.err != nil {
			failed++
			continue
		}
		if r.servedBy == "" {
			c.t.Errorf("%s succeeded without naming its server", r.id)
			continue
		}
		p := c.proc(r.servedBy)
		p.mu.Lock()
		s, ok := p.served[r.id]
		p.mu.Unlock()
		if !ok {
			c.t.Errorf("%s: %s did not record serving it", r.id, r.servedBy)
			continue
		}
		if last, ok := lastTerm[r.worker]; ok && s.term < last {
			c.t.Errorf("%s served by %s with term %d after a call served with term %d", r.id, r.servedBy, s.term, last)
		}
		lastTerm[r.worker] = s.term
	}
	return failed
}
