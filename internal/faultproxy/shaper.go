package faultproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// This file shapes HTTP traffic to a store's emulator like the real store:
// each request takes a latency drawn from a distribution for its kind (read
// or conditional write), and writes to one object beyond the store's rate
// are answered as that store throttles them. The TCP Proxy above works
// below HTTP and cannot do either: it sees bytes, not operations.

// Op is the kind of a store request, as a Shaper classifies it.
type Op int

// The kinds of request. OpOther covers everything that is neither a read
// nor a write of one object (bucket, container and table checks).
const (
	OpOther Op = iota
	OpRead
	OpWrite
)

func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	}
	return "other"
}

// Latency is a distribution of request latencies: log-normal, through its
// median and its 99th percentile, which is how stores' latencies are
// usually published and how their long tail looks. A zero P99 (or one below
// the median) means every request takes the median.
type Latency struct {
	Median, P99 time.Duration
}

// z99 is the 99th percentile of the standard normal distribution.
const z99 = 2.3263478740408408

// sample draws a latency. Draws are capped at 3 x P99 so that one draw from
// the far tail cannot stall a run.
func (l Latency) sample(r *rand.Rand) time.Duration {
	if l.Median <= 0 {
		return 0
	}
	if l.P99 <= l.Median {
		return l.Median
	}
	sigma := math.Log(float64(l.P99)/float64(l.Median)) / z99
	d := time.Duration(float64(l.Median) * math.Exp(sigma*r.NormFloat64()))
	return min(d, 3*l.P99)
}

// Scaled returns l with both figures multiplied by f.
func (l Latency) Scaled(f float64) Latency {
	return Latency{Median: scale(l.Median, f), P99: scale(l.P99, f)}
}

func scale(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

// Limit is a store's write rate limit on one object: a token bucket that
// holds up to Burst writes and refills at Rate per second. A zero Rate means
// no limit.
type Limit struct {
	Rate  float64
	Burst int
}

// Profile is how a store behaves towards one client: the latency of a read
// and of a conditional write of one small object, and its write limit on
// one object.
type Profile struct {
	Read, Write Latency
	WriteLimit  Limit
}

// Scaled returns p with every duration multiplied by f and every rate
// divided by it: the same store, with time running 1/f times as fast.
func (p Profile) Scaled(f float64) Profile {
	q := p
	q.Read, q.Write = p.Read.Scaled(f), p.Write.Scaled(f)
	if f > 0 {
		q.WriteLimit.Rate = p.WriteLimit.Rate / f
	}
	return q
}

// Store describes one store's HTTP API: which requests read or write which
// object, and the answer it gives to a write it throttles.
type Store struct {
	// Name names the store in errors.
	Name string
	// Classify tells a request's kind and the object it reads or writes
	// (any string that names the object uniquely). body is the request's
	// whole body.
	Classify func(r *http.Request, body []byte) (op Op, object string)
	// Throttled returns the store's answer to a throttled write r.
	Throttled func(r *http.Request) *http.Response
}

// ShaperStats counts what a Shaper has done.
type ShaperStats struct {
	// Requests counts the requests of each kind, throttled ones included.
	Requests [3]int
	// Throttled counts the writes answered as throttled.
	Throttled int
}

// Shaper is an http.RoundTripper that passes requests to another one (the
// transport to a store's emulator) as the store described by its Profile
// would answer them. Each request waits half its latency before it is
// passed on and the rest after the answer, so that a write is applied midway
// through it, as over a real network; an emulator slower than the drawn
// latency adds its own excess. A write that reaches the store (midway) past
// the Profile's WriteLimit for its object is not passed on: it gets the
// Store's throttled answer at the end of its latency. Only writes that
// succeed (2xx) use up the limit, when they are applied, as only they change
// the object.
//
// Its methods are safe for concurrent use.
type Shaper struct {
	next  http.RoundTripper
	store Store

	mu      sync.Mutex
	profile Profile
	rng     *rand.Rand
	buckets map[string]*tokenBucket
	stats   ShaperStats
	lat     [3][]time.Duration
}

type tokenBucket struct {
	tokens float64
	at     time.Time
}

// NewShaper returns a Shaper that passes requests on to next (nil:
// http.DefaultTransport) shaped by p. seed seeds its latency draws.
func NewShaper(next http.RoundTripper, store Store, p Profile, seed uint64) *Shaper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Shaper{
		next:    next,
		store:   store,
		profile: p,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		buckets: map[string]*tokenBucket{},
	}
}

// SetProfile replaces the profile for requests that begin after the call.
func (s *Shaper) SetProfile(p Profile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.profile = p
	s.buckets = map[string]*tokenBucket{}
}

// Stats returns the counts so far.
func (s *Shaper) Stats() ShaperStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Latencies returns the round trips of every request of kind op that the
// Shaper passed on and that got an answer (throttled ones excluded), in the
// order they ended.
func (s *Shaper) Latencies(op Op) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lat[op])
}

// admit counts a request and draws its latency.
func (s *Shaper) admit(op Op) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests[op]++
	if op == OpWrite {
		return s.profile.Write.sample(s.rng)
	}
	return s.profile.Read.sample(s.rng)
}

// throttle reports whether a write to object reaching the store at now is
// past the object's limit, and counts it if so.
func (s *Shaper) throttle(object string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lim := s.profile.WriteLimit; lim.Rate > 0 && s.refill(object, lim, now).tokens < 1 {
		s.stats.Throttled++
		return true
	}
	return false
}

// refill brings object's bucket up to now and returns it.
func (s *Shaper) refill(object string, lim Limit, now time.Time) *tokenBucket {
	burst := float64(max(lim.Burst, 1))
	b := s.buckets[object]
	if b == nil {
		b = &tokenBucket{tokens: burst, at: now}
		s.buckets[object] = b
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*lim.Rate)
	b.at = now
	return b
}

// applied takes a token for a write to object that succeeded.
func (s *Shaper) applied(object string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lim := s.profile.WriteLimit
	if lim.Rate <= 0 {
		return
	}
	b := s.refill(object, lim, time.Now())
	b.tokens--
}

func (s *Shaper) record(op Op, d time.Duration) {
	s.mu.Lock()
	s.lat[op] = append(s.lat[op], d)
	s.mu.Unlock()
}

// RoundTrip implements http.RoundTripper.
func (s *Shaper) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("faultproxy: reading the request body: %w", err)
		}
	}
	op, object := s.store.Classify(req, body)
	lat := s.admit(op)
	ctx := req.Context()
	if !sleepUntil(ctx, start.Add(lat/2)) {
		return nil, ctx.Err()
	}
	// The store judges a write's rate when the write reaches it, against
	// the writes it has applied.
	if op == OpWrite && s.throttle(object, time.Now()) {
		if !sleepUntil(ctx, start.Add(lat)) {
			return nil, ctx.Err()
		}
		resp := s.store.Throttled(req)
		resp.Request = req
		return resp, nil
	}
	out := req.Clone(ctx)
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := s.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if op == OpWrite && resp.StatusCode/100 == 2 {
		s.applied(object)
	}
	if !sleepUntil(ctx, start.Add(lat)) {
		resp.Body.Close()
		return nil, ctx.Err()
	}
	s.record(op, time.Since(start))
	return resp, nil
}

// sleepUntil waits until t or ctx's end, reporting false for the latter.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// answer builds a response with status code, header values (name, value
// pairs) and body.
func answer(req *http.Request, code int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader([]byte(body))),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
