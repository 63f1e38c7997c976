package kube

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// Scheme is the URL scheme this package registers with
// leaderelection.RegisterScheme:
//
//	k8s://NAMESPACE/NAME[?context=CONTEXT]
//
// leaderelection.OpenDecider loads the client configuration the way kubectl
// does: the files in $KUBECONFIG, else ~/.kube/config, and, when neither
// exists, the in-cluster configuration of a Pod's service account. context
// picks a kubeconfig context other than the current one. No other query
// parameter is accepted, nor one given twice or empty ("context="), a
// fragment, user information or a port; for any other client setting, call
// NewDecider or NewDeciderForConfig.
const Scheme = "k8s"

func init() {
	leaderelection.RegisterScheme(Scheme, leaderelection.URLOpener{
		Open:   openURL,
		Params: []string{"context"},
		Form:   "k8s://NAMESPACE/NAME?context=CONTEXT",
	})
}

func openURL(_ context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
	if err := urlcheck.Check(u); err != nil {
		return nil, fmt.Errorf("%w: %w; want k8s://NAMESPACE/NAME", leaderelection.ErrBadURL, err)
	}
	namespace, name := u.Host, strings.TrimPrefix(u.Path, "/")
	switch {
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: want k8s://NAMESPACE/NAME", leaderelection.ErrBadURL)
	case namespace == "":
		return nil, fmt.Errorf("%w: no namespace; want k8s://NAMESPACE/NAME", leaderelection.ErrBadURL)
	case u.Port() != "":
		return nil, fmt.Errorf("%w: namespace %q has a port: the host is the namespace (the API server comes from the kubeconfig); want k8s://NAMESPACE/NAME",
			leaderelection.ErrBadURL, namespace)
	case name == "":
		return nil, fmt.Errorf("%w: no Lease name; want k8s://NAMESPACE/NAME", leaderelection.ErrBadURL)
	case strings.Contains(name, "/"):
		return nil, fmt.Errorf("%w: Lease name %q contains a slash; want k8s://NAMESPACE/NAME", leaderelection.ErrBadURL, name)
	}
	if err := checkNames(namespace, name); err != nil {
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	kctx := u.Query().Get("context")
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kctx}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), overrides)
	if raw, err := cc.RawConfig(); kctx != "" && err == nil && raw.Contexts[kctx] == nil {
		// The URL's mistake (or the environment's: KUBECONFIG).
		return nil, fmt.Errorf("%w: context %q is not in the kubeconfig", leaderelection.ErrBadURL, kctx)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: loading the client configuration (kubeconfig or in-cluster) for %s: %w", u.Redacted(), err)
	}
	d, err := NewDeciderForConfig(cfg, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	return d, nil
}
