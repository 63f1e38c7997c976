package kube_test

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/testenv"
	"github.com/racedecider/leaderelection/kube"
)

// The environment scripts/kube-apiserver.sh prints. Without it these tests
// skip, or fail under testenv.RequireServers (as in CI).
const (
	envKubeconfig       = "LEADERELECTION_KUBECONFIG"
	envKubeconfigNobody = "LEADERELECTION_KUBECONFIG_NOBODY"
	startCommand        = `eval "$(scripts/kube-apiserver.sh start)"`
	namespace           = "default"
)

var (
	runID  = randomHex(3)
	leaseN atomic.Int64
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freshLease returns a Lease name no other test (of this run or an earlier
// one on the same server) uses.
func freshLease() string {
	return "le-test-" + runID + "-" + strconv.FormatInt(leaseN.Add(1), 10)
}

// restConfig loads the kubeconfig the environment variable names, with
// client-go's own client-side rate limit off (the tests make hundreds of
// requests in bursts).
func restConfig(t testing.TB, env string) *rest.Config {
	t.Helper()
	path := testenv.Server(t, env, "kube-apiserver", startCommand)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

func adminConfig(t testing.TB) *rest.Config { return restConfig(t, envKubeconfig) }

// viaAddr returns a copy of cfg that reaches the API server at addr (a
// fault proxy) instead; the certificate is valid for 127.0.0.1.
func viaAddr(t testing.TB, cfg *rest.Config, addr string) *rest.Config {
	t.Helper()
	c := rest.CopyConfig(cfg)
	u, err := url.Parse(c.Host)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	c.Host = u.String()
	return c
}

func serverAddr(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		t.Fatalf("server %q has no port", cfg.Host)
	}
	return u.Host
}

func clientset(t testing.TB, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func newDecider(t testing.TB, cfg *rest.Config, name string) *kube.Decider {
	t.Helper()
	d, err := kube.NewDeciderForConfig(cfg, namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// writeFirst writes with d the first record of ours, started at t0 with a
// minute's term, and returns it and its token.
func writeFirst(t testing.TB, d *kube.Decider, t0 time.Time) (*entry.RaceEntry, entry.LeaderToken) {
	t.Helper()
	first := &entry.RaceEntry{ElectionNumber: t0.UnixMicro(), Term: t0.UnixMicro(), LeaderID: "ours", TermExpiry: t0.Add(time.Minute), WriteID: "w1"}
	tok, err := d.WriteEntry(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	return first, tok
}

func deleteOptions() metav1.DeleteOptions { return metav1.DeleteOptions{} }

func testenvKubeconfig(t testing.TB) string {
	return testenv.Server(t, envKubeconfig, "kube-apiserver", startCommand)
}

// waitAsync calls d.WaitForChange(tok) in a goroutine and delivers the record
// it returns (nil on error, which fails the test as what).
func waitAsync(t *testing.T, d *kube.Decider, tok entry.LeaderToken, what string) <-chan *entry.RaceEntry {
	done := make(chan *entry.RaceEntry, 1)
	go func() {
		e, err := d.WaitForChange(t.Context(), tok)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		done <- e
	}()
	return done
}
