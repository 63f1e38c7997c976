// Package tlsfail tells the TLS failures that no retry cures from those that
// may pass, for the backends' error classes: no request was sent, and none
// will be until the URL or the certificate changes, so a backend reports
// such a failure as a refusal rather than an unknown outcome.
package tlsfail

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/url"
)

// Why says why no TLS connection to the endpoint can be made when err is
// one of the failures that no retry cures, and "" otherwise: a server
// answering https with plain HTTP (http.ErrSchemeMismatch: an emulator's
// port given as https://), or a certificate this host does not accept
// (tls.CertificateVerificationError: an unknown authority, another host's
// name). It names the endpoint (scheme and host) when err says which.
//
// A certificate that has expired or is not yet valid is not such a failure:
// time cures it, as the server's certificate is renewed or this host's clock
// is set (a host that has just booted or resumed), with no change here, and
// a refusal would end every candidate's Acquire, the leader's with it, for
// a lapse of a few minutes.
func Why(err error) string {
	var cve *tls.CertificateVerificationError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.Is(err, http.ErrSchemeMismatch):
		return endpoint(err) + " answers in plain HTTP, not HTTPS (use http:// for it)"
	case errors.As(err, &cve) && errors.As(cve.Err, &invalid) && invalid.Reason == x509.Expired:
		return ""
	case errors.As(err, &cve):
		return endpoint(err) + " presents a certificate this host does not accept: " + cve.Err.Error()
	}
	return ""
}

// endpoint names the endpoint of the request that err, a transport error,
// failed: its scheme and host.
func endpoint(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return "the endpoint " + u.Scheme + "://" + u.Host
		}
	}
	return "the endpoint"
}
