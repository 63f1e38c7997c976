// Package faultproxy is a TCP proxy for tests that sits between a client and a
// store's emulator and injects the faults a real network produces: latency,
// responses lost after the request was applied (ambiguous writes), connection
// resets, and a cut-off client.
//
// # Faults act per request, not per connection
//
// HTTP clients keep connections alive and reuse them, so a fault armed for
// "the next connection" would often never fire. This proxy therefore counts
// requests: on every connection, new or reused, a request begins with the
// first bytes the client sends after the connection opened or after the
// server last sent bytes back. This fits HTTP/1.1 without pipelining (what
// Go's net/http sends over plain http) and any other protocol in which the
// client speaks, then waits for the whole answer. It does not fit a server
// that answers before it has read the whole request (Expect: 100-continue,
// early error replies): the rest of that request counts as a new one.
//
// Tests need no special transport: DisableKeepAlives is not required.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Stats counts what a Proxy has done since it started.
type Stats struct {
	// Connections is the number of client connections accepted.
	Connections int
	// Requests is the number of requests seen (see the package comment for
	// how a request is recognised), including dropped and reset ones.
	Requests int
	// DroppedResponses is the number of requests that were forwarded but
	// whose response was withheld (DropResponses).
	DroppedResponses int
	// Resets is the number of client connections reset, by ResetNext or
	// because the proxy was cut.
	Resets int
}

// Proxy forwards TCP connections to one target, injecting faults on demand.
// Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	done   chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	latency   time.Duration
	dropNext  int
	resetNext int
	cut       bool
	conns     map[*link]struct{}
	stats     Stats
	closed    bool
}

// link is one proxied connection: the client's side and the target's side.
type link struct {
	client, upstream net.Conn
	// inResponse is set once the target has sent bytes for the current
	// request; the client's next bytes then begin a new request. Guarded by
	// Proxy.mu.
	inResponse bool
	// dropping is set when the current request's response must be withheld.
	// Guarded by Proxy.mu.
	dropping bool
	// started is set once the client has sent its first bytes.
	started bool
}

// Start listens on 127.0.0.1:0 and forwards every connection to target
// ("host:port"). The proxy is closed, and every connection through it, by
// t.Cleanup.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: listen: %v", err)
	}
	p := &Proxy{
		target: target,
		ln:     ln,
		done:   make(chan struct{}),
		conns:  map[*link]struct{}{},
	}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address clients connect to, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency sets a delay added before each chunk of client bytes is
// forwarded to the target. Zero removes it. It applies to chunks read after
// the call.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// DropResponses arms the next n requests, on any connection, to be ambiguous:
// the request is forwarded whole, and when the target begins to answer (so it
// has received and acted on the request) the client's connection is closed
// without any of the answer. The client sees the connection close (EOF) and
// cannot tell whether the request was applied. It replaces any count armed
// before; DropResponses(0) disarms.
func (p *Proxy) DropResponses(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropNext = max(n, 0)
}

// ResetNext arms the next n requests, on any connection, to be refused: the
// client's connection is reset (TCP RST, via SetLinger(0)) before any byte of
// the request is forwarded, so the request is certainly not applied although
// the client cannot know that. On a new connection this means the connection
// is reset before anything is forwarded. It replaces any count armed before;
// ResetNext(0) disarms.
func (p *Proxy) ResetNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetNext = max(n, 0)
}

// SetCut cuts the client off from the target, or restores its access. While
// cut, every open connection is closed at once and every new connection is
// reset as soon as it is accepted. Requests in flight when the cut begins may
// or may not have reached the target.
func (p *Proxy) SetCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	var open []*link
	if cut {
		for l := range p.conns {
			open = append(open, l)
		}
	}
	p.mu.Unlock()
	for _, l := range open {
		l.client.Close()
		l.upstream.Close()
	}
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops the proxy, closes every connection through it and waits for its
// goroutines to end. Start arranges for it to be called by t.Cleanup; calling
// it again does nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	var open []*link
	for l := range p.conns {
		open = append(open, l)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, l := range open {
		l.client.Close()
		l.upstream.Close()
	}
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// reset closes c with a TCP RST instead of an orderly FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) serve(client net.Conn) {
	p.mu.Lock()
	p.stats.Connections++
	if p.cut || p.closed {
		p.stats.Resets++
		p.mu.Unlock()
		reset(client)
		return
	}
	p.mu.Unlock()

	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		reset(client)
		return
	}
	l := &link{client: client, upstream: upstream}
	p.mu.Lock()
	if p.cut || p.closed {
		p.stats.Resets++
		p.mu.Unlock()
		reset(client)
		upstream.Close()
		return
	}
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
		client.Close()
		upstream.Close()
	}()

	var wg sync.WaitGroup
	wg.Go(func() { p.forwardResponses(l) })
	p.forwardRequests(l)
	wg.Wait()
}

// forwardRequests copies client bytes to the target, starting a new request
// whenever the client speaks after the target did.
func (p *Proxy) forwardRequests(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if !l.started || l.inResponse {
				l.started = true
				l.inResponse = false
				p.stats.Requests++
				switch {
				case p.cut:
					p.stats.Resets++
					p.mu.Unlock()
					reset(l.client)
					l.upstream.Close()
					return
				case p.resetNext > 0:
					p.resetNext--
					p.stats.Resets++
					p.mu.Unlock()
					reset(l.client)
					l.upstream.Close()
					return
				case p.dropNext > 0:
					p.dropNext--
					l.dropping = true
				}
			}
			latency := p.latency
			p.mu.Unlock()
			if latency > 0 && !p.wait(latency) {
				return
			}
			if _, werr := l.upstream.Write(buf[:n]); werr != nil {
				l.client.Close()
				return
			}
		}
		if err != nil {
			// The client finished sending (or went away): pass the
			// half-close on so that the target can finish its answer.
			if tc, ok := l.upstream.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite()
			} else {
				l.upstream.Close()
			}
			return
		}
	}
}

// forwardResponses copies target bytes to the client, withholding the answer
// to a request armed by DropResponses.
func (p *Proxy) forwardResponses(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.upstream.Read(buf)
		if n > 0 {
			p.mu.Lock()
			l.inResponse = true
			drop := l.dropping
			if drop {
				l.dropping = false
				p.stats.DroppedResponses++
			}
			p.mu.Unlock()
			if drop {
				l.client.Close()
				l.upstream.Close()
				return
			}
			if _, werr := l.client.Write(buf[:n]); werr != nil {
				l.upstream.Close()
				return
			}
		}
		if err != nil {
			l.client.Close()
			return
		}
	}
}

// wait sleeps for d, or until the proxy closes (reporting false).
func (p *Proxy) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.done:
		return false
	}
}
