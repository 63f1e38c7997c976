package kube_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/kube"
)

func TestOpenDeciderErrors(t *testing.T) {
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	cases := map[string]string{
		"k8s:///election":              "no namespace",
		"k8s://default":                "no Lease name",
		"k8s://default/":               "no Lease name",
		"k8s://default/a/b":            "contains a slash",
		"k8s://default:80/a":           `namespace "default:80" has a port`,
		"k8s://Default/a":              `namespace "Default"`,
		"k8s://default/UPPER":          `Lease name "UPPER"`,
		"k8s://default/a?namespace=x":  "namespace",
		"k8s://default/a?context=nope": "context",
		// Present but empty is not left out: no fallback to the current context.
		"k8s://default/a?context=":            "query parameter context is empty",
		"k8s://default/a?context=x&context=y": "query parameter context is given 2 times",
		"k8s://default/a#1":                   `fragment "#1"`,
		"k8s://u@default/a":                   `user information "u@": k8s URLs take no user name or password`,
	}
	for raw, want := range cases {
		t.Run(raw, func(t *testing.T) {
			d, err := leaderelection.OpenDecider(t.Context(), raw)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("OpenDecider(%q) = %v, %v; want an error saying %q", raw, d, err, want)
			}
		})
	}
	if _, err := leaderelection.OpenDecider(t.Context(), "k8s:///x"); !errors.Is(err, leaderelection.ErrBadURL) {
		t.Errorf("a URL without a namespace: %v, want leaderelection.ErrBadURL", err)
	}
	// A context the kubeconfig lacks is the URL's mistake.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: here, context: {cluster: c, user: u}}]
current-context: here
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	if _, err := leaderelection.OpenDecider(t.Context(), "k8s://default/a?context=nope"); !errors.Is(err, leaderelection.ErrBadURL) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a context the kubeconfig lacks: %v, want leaderelection.ErrBadURL naming it", err)
	}
	d, err := leaderelection.OpenDecider(t.Context(), "k8s://default/a?context=here")
	if err != nil {
		t.Fatalf("the kubeconfig's own context: %v", err)
	}
	d.(*kube.Decider).Close()
}

// TestOpenDecider opens a Decider by URL, with the kubeconfig found through
// $KUBECONFIG as kubectl finds it.
func TestOpenDecider(t *testing.T) {
	t.Setenv("KUBECONFIG", testenvKubeconfig(t))
	name := freshLease()
	d, err := leaderelection.OpenDecider(t.Context(), "k8s://"+namespace+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	kd, ok := d.(*kube.Decider)
	if !ok || kd.Namespace() != namespace || kd.Name() != name {
		t.Fatalf("OpenDecider returned %#v", d)
	}
	// The engine names the store by it in errors, logs and metrics.
	if got, want := kd.String(), "k8s://"+namespace+"/"+name; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	t.Cleanup(func() { _ = kd.Close() })
	if e, err := d.ReadCurrent(t.Context()); err != nil || !e.Token.IsZero() {
		t.Fatalf("ReadCurrent of a new election = %+v, %v", e, err)
	}
}

// TestNewDeciderNilClient: a clientset left nil (kubernetes.NewForConfig
// returns one with its error) is an error naming it, not a panic.
func TestNewDeciderNilClient(t *testing.T) {
	var cs *kubernetes.Clientset
	d, err := kube.NewDecider(cs, "default", "election")
	if err == nil || !strings.Contains(err.Error(), "nil client (*kubernetes.Clientset)") {
		t.Fatalf("NewDecider(nil *kubernetes.Clientset) = %v, %v; want an error naming the nil client", d, err)
	}
}
