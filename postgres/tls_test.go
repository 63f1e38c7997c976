package postgres_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/testenv"
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
	ln := sslServer(t, func(c net.Conn) {
		if _, err := c.Write([]byte{'S'}); err == nil {
			_ = tls.Server(c, untrusted.TLS).Handshake()
		}
	})
	d := newDecider(t, newPool(t, "postgres://u:p@"+ln.Addr().String()+"/db?sslmode=verify-full", 1), "elections", "job")
	racedecidertest.CheckRefuses(t, d, d.String(), "presents a certificate this host does not accept")
}

// TestTLSRefusedIsRefused: with sslmode=require, a server that answers the
// SSLRequest with 'N' (ssl off, as on the throwaway server, or a pooler
// without TLS) never gets a statement, and will not until its configuration
// or the sslmode changes: not a connection failure retried for ever (it was
// throttling) but a refusal naming the row and the server, and Acquire ends.
func TestTLSRefusedIsRefused(t *testing.T) {
	ln := sslServer(t, func(c net.Conn) {
		if _, err := c.Write([]byte{'N'}); err == nil {
			_, _ = io.Copy(io.Discard, c) // until pgx hangs up
		}
	})
	d := newDecider(t, newPool(t, "postgres://u:p@"+ln.Addr().String()+"/db?sslmode=require", 1), "elections", "job")
	racedecidertest.CheckRefuses(t, d, d.String(), "the server at "+ln.Addr().String()+" does not take TLS connections")

	// With a second host that may come up, the failure may pass.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	d = newDecider(t, newPool(t, "postgres://u:p@"+ln.Addr().String()+","+closed.Addr().String()+"/db?sslmode=require", 1), "elections", "job")
	_, err = d.ReadCurrent(t.Context())
	if err == nil || errors.Is(err, entry.ErrRefused) {
		t.Errorf("ReadCurrent with one host refusing TLS and one down: %v; want an error that is not a refusal", err)
	}
	t.Logf("one host refusing TLS, one down: %v", err)
}

// sslServer returns a listener that reads each connection's SSLRequest and
// hands the connection to answer.
func sslServer(t *testing.T, answer func(net.Conn)) net.Listener {
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
				if _, err := io.ReadFull(c, make([]byte, 8)); err == nil { // SSLRequest
					answer(c)
				}
			}()
		}
	}()
	return ln
}

// TestTLSRefusedByServer: the same against the throwaway server, when it
// runs without ssl.
func TestTLSRefusedByServer(t *testing.T) {
	u, err := url.Parse(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "require")
	u.RawQuery = q.Encode()
	pool := newPool(t, u.String(), 1)
	if err := pool.Ping(t.Context()); err == nil {
		// scripts/postgres.sh starts one with ssl off; a server of the
		// developer's own may take TLS, and CI must notice the skip.
		testenv.Missing(t, "a PostgreSQL server without ssl (this one takes TLS connections): start the throwaway one with `eval \"$(scripts/postgres.sh start)\"`")
	}
	d := newDecider(t, pool, "elections", "job")
	racedecidertest.CheckRefuses(t, d, d.String(), "does not take TLS connections", u.Host)
}
