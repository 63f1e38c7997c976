package legrpc_test

import (
	"net/url"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/racedecider/leaderelection/gcs"
)

// TestGCSEmulator runs the graceful handover and the crash on Cloud Storage
// (fake-gcs-server on a loopback port), a store that cannot push changes:
// candidates and the client's resolver poll it.
func TestGCSEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the emulator test in short mode")
	}
	const bucket = "legrpc-test"
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1"})
	if err != nil {
		t.Fatalf("starting fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	client, err := storage.NewClient(t.Context(),
		option.WithEndpoint("http://"+u.Host+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	d, err := gcs.NewDecider(client, bucket, "elections/legrpc")
	if err != nil {
		t.Fatal(err)
	}

	c := newCluster(t, d, 3)
	cl := startClient(t, newConn(t, watchConfig(d)))
	first := c.mon.Next(patience)
	cl.waitServedBy(cl.waitServedBy(0, first.ID).index+50, first.ID)

	// Graceful: no call may fail.
	mark := cl.mark()
	c.stop(c.proc(first.ID))
	second := c.mon.Next(patience)
	r := cl.waitServedBy(mark, second.ID)
	t.Logf("release: %s elected, first call served %v later", second.ID, r.end.Sub(second.Start))
	cl.waitServedBy(r.index+50, second.ID)
	if failed := c.checkServed(cl.snapshot()); failed > 0 {
		t.Errorf("%d calls failed through a graceful handover", failed)
	}
	c.start(c.proc(first.ID))

	// Crash: calls resume on the successor.
	mark = cl.mark()
	c.proc(second.ID).store.cut.Store(true)
	third := c.mon.Next(patience)
	r = cl.waitServedBy(mark, third.ID)
	t.Logf("crash: %s elected %v after the expiry, first call served %v later",
		third.ID, third.Start.Sub(second.TV.Get()), r.end.Sub(third.Start))
	cl.waitServedBy(r.index+50, third.ID)
	cl.stop()
	c.proc(second.ID).store.cut.Store(false)
	results := cl.snapshot()
	failed := c.checkServed(results)
	t.Logf("%d calls, %d failed (across the crash), %d rejected and retried", len(results), failed, c.rejected())
}
