package postgres_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/racedecider/leaderelection/racedecidertest"
)

// TestTLSFailureIsRefused: with sslmode=verify-full, a server whose
// certificate this host does not trust never gets a statement: not a
// connection failure retried for ever but a refusal naming the row and why,
// and Acquire ends. The server here answers PostgreSQL's SSLRequest and
// then shakes hands with a certificate of its own, which is all a client
// sees of such a server before it gives up.
func TestTLSFailureIsRefused(t *testing.T) {
	untrusted := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(untrusted.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.ReadFull(c, make([]byte, 8)); err != nil { // SSLRequest
					return
				}
				if _, err := c.Write([]byte{'S'}); err != nil {
					return
				}
				_ = tls.Server(c, untrusted.TLS).Handshake()
			}()
		}
	}()
	d := newDecider(t, newPool(t, "postgres://u:p@"+ln.Addr().String()+"/db?sslmode=verify-full", 1), "elections", "job")
	racedecidertest.CheckRefuses(t, d, d.String(), "presents a certificate this host does not accept")
}
