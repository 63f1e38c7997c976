package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/internal/testenv"
)

// The second API server scripts/kube-apiserver.sh starts, on the same etcd,
// serves Lease watches from etcd rather than from its watch cache, so that
// compacting etcd makes a watch from an older resourceVersion end with 410
// Gone. (The watch cache keeps at least 75 seconds of history, and up to
// 100k events before that, so it cannot be made to answer 410 in a test.)
const (
	envKubeconfigNoCache = "LEADERELECTION_KUBECONFIG_NOCACHE"
	envEtcd              = "LEADERELECTION_KUBE_ETCD"
)

func noCacheConfig(t testing.TB) *rest.Config { return restConfig(t, envKubeconfigNoCache) }

// compactEtcd discards etcd's history before revision rev (a Lease's
// resourceVersion), through etcd's JSON gateway, and waits until that is
// done. History compacted further already (by an API server's periodic
// compaction) is fine.
func compactEtcd(t *testing.T, rev string) {
	t.Helper()
	etcd := testenv.Server(t, envEtcd, "etcd (scripts/kube-apiserver.sh)", startCommand)
	body := fmt.Sprintf(`{"revision": %q, "physical": true}`, rev)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, etcd+"/v3/kv/compaction", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("compacting etcd at %s: %v", etcd, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && !strings.Contains(string(answer), "required revision has been compacted") {
		t.Fatalf("compacting etcd to revision %s: %s: %s", rev, resp.Status, answer)
	}
}

// TestWatchRelistsOnGone makes the watch resume from a resourceVersion that
// etcd no longer has: the API server ends it with 410 Gone, and the watcher
// must list again and go on pushing changes, with a bounded number of
// requests and without reading the Lease for its waiters.
func TestWatchRelistsOnGone(t *testing.T) {
	cfg := noCacheConfig(t)
	name := freshLease()
	p := faultproxy.Start(t, serverAddr(t, cfg))
	var sent requests
	d := newDecider(t, sent.counting(viaAddr(t, cfg, p.Addr())), name)
	direct := newDecider(t, cfg, name)
	write := func(n int64, tok entry.LeaderToken) entry.LeaderToken {
		t.Helper()
		tok, err := direct.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: n, LeaderID: "a",
			WriteID: fmt.Sprintf("w%d", n), TermExpiry: time.Now().Add(time.Minute), Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// wait calls WaitForChange on tok for at most limit.
	wait := func(tok entry.LeaderToken, limit time.Duration) (*entry.RaceEntry, error) {
		ctx, cancel := context.WithTimeout(t.Context(), limit)
		defer cancel()
		return d.WaitForChange(ctx, tok)
	}

	tok := write(0, entry.LeaderToken{})
	if e, err := wait(entry.LeaderToken{}, 10*time.Second); err != nil || e.WriteID != "w0" {
		t.Fatalf("WaitForChange starting the watch = %+v, %v; want w0 at once", e, err)
	}

	// The watch's connection breaks; the Lease changes twice meanwhile, and
	// etcd forgets the history the watch would resume from.
	p.SetCut(true)
	tok = write(1, tok)
	tok = write(2, tok)
	compactEtcd(t, tok.Version)
	p.SetCut(false)
	cut := time.Now()

	// The watch resumes, gets 410, lists again and watches from there.
	relisted := func() bool { return sent.count(kindList) >= 2 && sent.sentAfter(kindWatch, kindList) }
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if !sent.await(ctx, relisted) {
		t.Fatalf("no list and watch again 30s after the connection came back: %v", &sent)
	}
	for {
		// Blocks once the new watch is up (w2 is what it listed);
		// fails at once while it is down.
		_, err := wait(tok, 200*time.Millisecond)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if time.Since(cut) > 30*time.Second {
			t.Fatalf("the watch is not back 30s after the connection came back: %v; %v", err, &sent)
		}
	}
	t.Logf("watch back %v after the connection was restored: %v", time.Since(cut).Round(time.Millisecond), &sent)

	// A change after the recovery is pushed.
	done := make(chan *entry.RaceEntry, 1)
	go func() {
		e, err := wait(tok, 10*time.Second)
		if err != nil {
			t.Errorf("WaitForChange after the relist: %v", err)
		}
		done <- e
	}()
	write(3, tok)
	if e := <-done; e == nil || e.WriteID != "w3" {
		t.Fatalf("WaitForChange after the relist returned %+v, want w3", e)
	}

	// Exactly one list after each 410, a handful of watch openings (client-
	// go retries an opening that fails once a second), and no GET: the
	// waiters were answered from the watch.
	gone, lists, watches := sent.count(kindGone), sent.count(kindList), sent.count(kindWatch)
	if gone < 1 || lists != gone+1 || watches > 12 || sent.count(kindGet) != 0 {
		t.Errorf("requests: %v; want at least one 410, one list more than 410s, at most 12 watches and no GET", &sent)
	}
}
