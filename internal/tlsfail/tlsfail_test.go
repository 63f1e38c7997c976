package tlsfail

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// TestWhyOutOfDate: a certificate this host trusts but whose validity
// period does not hold now (expired, or not yet valid) is no reason: time
// cures it, as the server's certificate is renewed or this host's clock is
// set, and a refusal would end Acquire for a lapse of minutes.
func TestWhyOutOfDate(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name      string
		from, end time.Time
	}{
		{"expired", now.Add(-48 * time.Hour), now.Add(-time.Hour)},
		{"not yet valid", now.Add(time.Hour), now.Add(48 * time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := &x509.Certificate{
				SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "store"},
				NotBefore: c.from, NotAfter: c.end, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
				KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
			srv.StartTLS()
			defer srv.Close()
			roots := x509.NewCertPool()
			roots.AddCert(cert)
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}).Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("the request succeeded")
			}
			var cve *tls.CertificateVerificationError
			if !errors.As(err, &cve) {
				t.Fatalf("the handshake failed with %v; want a certificate verification error", err)
			}
			if got := Why(fmt.Errorf("wrapped: %w", err)); got != "" {
				t.Errorf("Why(%v) = %q; want \"\"", err, got)
			}
		})
	}
}
