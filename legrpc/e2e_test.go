package legrpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/legrpc"
	"github.com/racedecider/leaderelection/memory"
)

func watchConfig(d leaderelection.RaceDecider) leaderelection.WatchConfig {
	return leaderelection.WatchConfig{Decider: d, MaxClockSkew: testSkew, PollInterval: testTerm / 8}
}

// TestGracefulHandoverNoFailedCalls hands leadership over twice while a
// client calls in a loop: once by stopping the leader's candidate only (the
// former leader's server keeps running and rejects calls), once by stopping
// the candidate and then the server, as a process shutting down does. With
// the published retry policy, no call may fail.
func TestGracefulHandoverNoFailedCalls(t *testing.T) {
	mem := memory.NewDecider()
	c := newCluster(t, mem, 3)
	cl := startClient(t, newConn(t, watchConfig(mem)))

	first := c.mon.Next(patience)
	// Let the client get going, so that calls are in flight at the handover.
	cl.waitServedBy(cl.waitServedBy(0, first.ID).index+100, first.ID)

	mark := cl.mark()
	c.stop(c.proc(first.ID)) // releases
	second := c.mon.Next(patience)
	cl.waitServedBy(cl.waitServedBy(mark, second.ID).index+100, second.ID)
	c.start(c.proc(first.ID)) // back as a follower

	mark = cl.mark()
	p := c.proc(second.ID)
	c.stop(p)
	p.srv.GracefulStop()
	third := c.mon.Next(patience)
	cl.waitServedBy(cl.waitServedBy(mark, third.ID).index+100, third.ID)
	cl.stop()

	results := cl.snapshot()
	if failed := c.checkServed(results); failed > 0 {
		for _, r := range results {
			if r.err != nil {
				t.Errorf("%s failed after %v: %v", r.id, r.end.Sub(r.start), r.err)
			}
		}
		t.Fatalf("%d of %d calls failed through graceful handovers", failed, len(results))
	}
	t.Logf("%d calls, none failed; %d rejected by followers and retried; leaders %s, %s, %s",
		len(results), c.rejected(), first.ID, second.ID, third.ID)
}

// TestLeaderCrashCallsResume cuts the leader off from the store, as if it had
// crashed or been partitioned away: it must stop serving by its term's
// expiry, and calls must reach the successor once it is elected.
func TestLeaderCrashCallsResume(t *testing.T) {
	mem := memory.NewDecider()
	c := newCluster(t, mem, 3)
	cl := startClient(t, newConn(t, watchConfig(mem)))

	first := c.mon.Next(patience)
	cl.waitServedBy(cl.waitServedBy(0, first.ID).index+100, first.ID)

	mark := cl.mark()
	c.proc(first.ID).store.cut.Store(true)
	second := c.mon.Next(patience)
	r := cl.waitServedBy(mark, second.ID)
	expiry := first.TV.Get()
	if !second.Start.After(expiry.Add(testSkew)) {
		t.Errorf("%s elected at %v, before the cut-off leader's expiry %v + MaxClockSkew", second.ID, second.Start, expiry)
	}
	t.Logf("crashed leader's term expired at %v; %s elected %v later; its first call served %v after its election",
		expiry.Format(time.StampMilli), second.ID, second.Start.Sub(expiry), r.end.Sub(second.Start))
	cl.waitServedBy(r.index+100, second.ID)
	cl.stop()
	c.proc(first.ID).store.cut.Store(false)

	results := cl.snapshot()
	failed := c.checkServed(results)
	for _, r := range results {
		if r.err == nil || r.servedBy != "" {
			continue
		}
		// A failure must be the unavailability of a leader, nothing else.
		if status.Code(r.err) != codes.Unavailable && status.Code(r.err) != codes.DeadlineExceeded {
			t.Errorf("%s failed with %v, want Unavailable or DeadlineExceeded", r.id, r.err)
		}
	}
	t.Logf("%d calls, %d failed across the crash; %d rejected by the expired leader or followers", len(results), failed, c.rejected())
}

// TestResolverStartedBeforeElection dials an election nobody has won yet:
// calls that do not wait fail at once naming the cause, and calls that wait
// reach the first leader once it is elected.
func TestResolverStartedBeforeElection(t *testing.T) {
	mem := memory.NewDecider()
	// Without retries, so that the fail-fast call fails at its first try.
	hc := healthpb.NewHealthClient(newConn(t, watchConfig(mem), grpc.WithDisableRetry()))
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), legrpc.ErrNoLeader.Error()) ||
		!strings.Contains(err.Error(), "nobody has been elected yet") {
		t.Fatalf("fail-fast call before any election: %v; want Unavailable naming ErrNoLeader", err)
	}

	// A client calling (and waiting) before any candidate runs.
	cl := startClient(t, newConn(t, watchConfig(mem)))
	c := newCluster(t, mem, 3)
	first := c.mon.Next(patience)
	r := cl.waitServedBy(0, first.ID)
	t.Logf("%s elected; a waiting call reached it %v later", first.ID, r.end.Sub(first.Start))
	cl.stop()
	if failed := c.checkServed(cl.snapshot()); failed > 0 {
		t.Errorf("%d calls failed; with waitForReady they should have waited for the first leader", failed)
	}
}

// TestFollowerRejectsNamingLeader calls a follower directly, bypassing the
// resolver and retries: the call is rejected with Unavailable and the
// leader's address.
func TestFollowerRejectsNamingLeader(t *testing.T) {
	mem := memory.NewDecider()
	c := newCluster(t, mem, 3)
	leader := c.mon.Next(patience)
	var follower *proc
	for _, p := range c.procs {
		if p.id != leader.ID {
			follower = p
		}
	}
	conn, err := grpc.NewClient("passthrough:///"+follower.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)

	// The follower learns of the leader when its candidate next looks at
	// the record (at once on a store that pushes); ask until it has.
	deadline := time.Now().Add(patience)
	for {
		_, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{})
		nl, ok := legrpc.NotLeaderFromError(err)
		if !ok {
			t.Fatalf("call to follower %s: %v; want a NotLeader rejection", follower.id, err)
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("rejection code %v, want Unavailable", status.Code(err))
		}
		if nl.LeaderID != "" {
			if nl.LeaderID != leader.ID || len(nl.HostPort) != 1 || nl.HostPort[0] != c.proc(leader.ID).addr || nl.Term != leader.Term {
				t.Errorf("rejection names %+v, want %s at %s with term %d", nl, leader.ID, c.proc(leader.ID).addr, leader.Term)
			}
			t.Logf("follower said: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower never named the leader: %v", err)
		}
	}

	// Streams are guarded too.
	stream, err := hc.Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if _, ok := legrpc.NotLeaderFromError(err); !ok {
		t.Errorf("stream to a follower: %v; want a NotLeader rejection", err)
	}
	if _, ok := legrpc.NotLeaderFromError(errors.New("unrelated")); ok {
		t.Error("NotLeaderFromError accepted an unrelated error")
	}
}

// TestGuardEndsStreamWithLeadership opens a stream on the leader and hands
// leadership over: the stream must end with a NotLeader rejection, so that a
// long-lived stream does not outlast the leadership it was opened under.
func TestGuardEndsStreamWithLeadership(t *testing.T) {
	mem := memory.NewDecider()
	c := newCluster(t, mem, 2)
	leader := c.mon.Next(patience)
	conn := newConn(t, watchConfig(mem))
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first message of a stream to the leader: %v", err)
	}
	hdr, _ := stream.Header()
	if got := hdr.Get("served-by"); len(got) != 1 || got[0] != leader.ID {
		t.Fatalf("stream served by %q, want the leader %s", got, leader.ID)
	}
	c.stop(c.proc(leader.ID))
	_, err = stream.Recv()
	if _, ok := legrpc.NotLeaderFromError(err); !ok {
		t.Fatalf("stream after the leader stepped down: %v; want a NotLeader rejection", err)
	}
	t.Logf("stream ended with: %v", err)
}
