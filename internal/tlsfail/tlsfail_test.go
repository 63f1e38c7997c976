package tlsfail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWhy makes each failure for real: a certificate this host does not
// trust, and a plain-HTTP server reached with https://. Anything else,
// a refused connection or a cancelled request, may pass.
func TestWhy(t *testing.T) {
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	untrusted := httptest.NewTLSServer(h)
	defer untrusted.Close()
	plain := httptest.NewServer(h)
	defer plain.Close()
	closed := httptest.NewServer(h)
	closedURL := "https://" + closed.Listener.Addr().String()
	closed.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, c := range []struct {
		name, url string
		ctx       context.Context
		want      string
	}{
		{"untrusted certificate", untrusted.URL, context.Background(), "the endpoint " + untrusted.URL + " presents a certificate this host does not accept: "},
		{"plain HTTP as https", "https://" + plain.Listener.Addr().String(), context.Background(), "the endpoint https://" + plain.Listener.Addr().String() + " answers in plain HTTP"},
		{"refused connection", closedURL, context.Background(), ""},
		{"cancelled", untrusted.URL, cancelled, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url+"/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}).Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("the request succeeded")
			}
			got := Why(fmt.Errorf("wrapped: %w", err))
			if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
				t.Errorf("Why(%v) = %q; want it to begin %q", err, got, c.want)
			}
		})
	}
	if got := Why(errors.New("x509: certificate signed by unknown authority")); got != "" {
		t.Errorf("Why of an error that only says so in its text = %q; want \"\"", got)
	}
}
