package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/testenv"
	"github.com/racedecider/leaderelection/memory"
)

// The benchmarks below time one renewal (the leader's extension write) and
// one read on each backend without added latency. On gcs and s3 the emulator
// runs in the same process, so its allocations are counted too; azblob,
// dynamodb, postgres and kube need their server running (they are skipped
// otherwise) and count only the client's.

func benchStore(b *testing.B, name string) leaderelection.RaceDecider {
	b.Helper()
	if srv, ok := servers[name]; ok {
		testenv.Server(b, srv.env, srv.name, srv.start)
	}
	be, err := newBackend(b.Context(), name, &settings{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(be.close)
	d, err := be.newStore(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	if cl, ok := d.(io.Closer); ok {
		b.Cleanup(func() { _ = cl.Close() })
	}
	return d
}

func leaderRecord() *entry.RaceEntry {
	return &entry.RaceEntry{
		LeaderID:         "scheduler-7f9c4b-2xkqp-1a2b3c4d",
		HostPort:         []string{"10.0.12.34:8443"},
		ConnectionParams: []byte(`{"loadBalancingConfig":[{"pick_first":{}}]}`),
		TermExpiry:       time.Now().Add(15 * time.Second),
		WriteID:          "0123456789abcdef01234567",
	}
}

var opBackends = []string{"memory", "gcs", "s3", "azblob", "dynamodb", "postgres", "kube"}

func BenchmarkRenewal(b *testing.B) {
	for _, name := range opBackends {
		b.Run(name, func(b *testing.B) {
			d := benchStore(b, name)
			next := leaderRecord()
			tok, err := d.WriteEntry(b.Context(), next)
			if err != nil {
				b.Fatal(err)
			}
			next.Token = tok
			b.ReportAllocs()
			for b.Loop() {
				next.ElectionNumber++
				next.TermExpiry = next.TermExpiry.Add(time.Millisecond)
				tok, err := d.WriteEntry(b.Context(), next)
				if err != nil {
					b.Fatal(err)
				}
				next.Token = tok
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, name := range opBackends {
		b.Run(name, func(b *testing.B) {
			d := benchStore(b, name)
			if _, err := d.WriteEntry(b.Context(), leaderRecord()); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.ReadCurrent(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// namedStore is a memory store that names itself, as every real backend does.
type namedStore struct{ *memory.Decider }

func (namedStore) String() string { return "named://store" }

// TestAccessNamesTheStore: what the engine logs and reports in a bench run
// names the store behind the bench's wrapper, as on the store itself, with
// push or without.
func TestAccessNamesTheStore(t *testing.T) {
	for _, push := range []bool{false, true} {
		el := newElection(namedStore{memory.NewDecider()}, push, 0, &rttLog{})
		if got := fmt.Sprint(el.newAccess("a").decider()); got != "named://store" {
			t.Errorf("push %v: the bench's decider is named %q; want the store's name, named://store", push, got)
		}
	}
}

// peerStore is another process's view of a memory store: its requests go
// to the same store, and it counts its Close.
type peerStore struct {
	*memory.Decider
	closed *atomic.Int64
}

func (p peerStore) Close() error { p.closed.Add(1); return nil }

// TestPeers: with -peers each candidate and watcher goes through a Decider
// of its own on the election, as separate processes do, and the cluster
// closes each of them; without, they share the election's.
func TestPeers(t *testing.T) {
	for _, peers := range []bool{false, true} {
		s := &settings{term: 2 * time.Second, skew: 100 * time.Millisecond, peers: peers}
		b, err := newBackend(t.Context(), "memory", s)
		if err != nil {
			t.Fatal(err)
		}
		var made, closed atomic.Int64
		store := memory.NewDecider()
		b.newStore = func(context.Context) (leaderelection.RaceDecider, error) { return store, nil }
		b.newPeer = func(of leaderelection.RaceDecider) (leaderelection.RaceDecider, error) {
			made.Add(1)
			return peerStore{of.(*memory.Decider), &closed}, nil
		}
		var inners []leaderelection.RaceDecider
		_, err = withCluster(t.Context(), s, b, func(c *cluster) (struct{}, error) {
			c.startN(3)
			c.watch("w")
			if _, err := c.rec.next(t.Context(), s.patience()); err != nil {
				return struct{}{}, err
			}
			c.mu.Lock()
			for _, cd := range c.cands {
				inners = append(inners, cd.acc.inner)
			}
			inners = append(inners, c.watchers[0].acc.inner)
			c.mu.Unlock()
			return struct{}{}, nil
		})
		if err != nil {
			t.Fatalf("peers %v: %v", peers, err)
		}
		want := int64(0)
		if peers {
			want = 4
		}
		if made.Load() != want || closed.Load() != want {
			t.Errorf("peers %v: %d peer Deciders made, %d closed; want %d of each", peers, made.Load(), closed.Load(), want)
		}
		for _, d := range inners {
			if _, own := d.(peerStore); own != peers {
				t.Errorf("peers %v: an access goes through %T", peers, d)
			}
		}
	}
}
