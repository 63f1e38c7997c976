package main

import (
	"bytes"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
)

// checkStoreURL opens rawURL as leaderelect does, checks status reports an
// empty election, writes a record through OpenDecider and checks status
// shows it.
func checkStoreURL(t *testing.T, rawURL string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if o := dispatch([]string{"status", "--store", rawURL, "--timeout=10s"}, &stdout, &stderr); o.code != 0 || !strings.Contains(stdout.String(), "none") {
		t.Fatalf("status on an empty store: %+v\n%s%s", o, &stdout, &stderr)
	}
	d, err := leaderelection.OpenDecider(t.Context(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	rec := &entry.RaceEntry{LeaderID: "cloud-leader", TermExpiry: time.Now().Add(time.Minute), WriteID: "w-1"}
	if _, err := d.WriteEntry(t.Context(), rec); err != nil {
		t.Fatalf("WriteEntry through %s: %v", rawURL, err)
	}
	stdout.Reset()
	if o := dispatch([]string{"status", "--store", rawURL}, &stdout, &stderr); o.code != 0 || !strings.Contains(stdout.String(), "cloud-leader") {
		t.Fatalf("status after a write: %+v\n%s%s", o, &stdout, &stderr)
	}
}

func TestGSURL(t *testing.T) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "elections"})
	u, _ := url.Parse(srv.URL())
	t.Setenv("STORAGE_EMULATOR_HOST", u.Host)
	checkStoreURL(t, "gs://elections/jobs/report%20sender?min_write_interval=0")
	for rawURL, want := range map[string]time.Duration{"gs://elections/a": time.Second, "gs://elections/a?min_write_interval=250ms": 250 * time.Millisecond} {
		d, err := leaderelection.OpenDecider(t.Context(), rawURL)
		if err != nil {
			t.Fatal(err)
		}
		if ws, ok := d.(leaderelection.WriteSpacer); !ok || ws.MinWriteInterval() != want {
			t.Errorf("%s: Decider %T, want a WriteSpacer with interval %v", rawURL, d, want)
		}
	}
}

// TestS3URL also checks the errors for bad s3 and gs URLs.
func TestS3URL(t *testing.T) {
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("elections"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	// The gs cases below fail before the client connects, but making one
	// needs credentials, or an emulator.
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1")
	checkStoreURL(t, "s3://elections/jobs/report?region=us-east-1&path_style=true&endpoint="+url.QueryEscape(srv.URL))

	for _, tc := range []struct{ url, want string }{
		{"s3://elections/k", "no AWS region"},
		{"s3://elections/k?region=x&path_style=maybe", `path_style="maybe"`},
		{"s3://elections/k?region=x&endpoint=minio:9000", "want an http:// or https:// URL"},
		{"s3://elections/k?regoin=x", "s3 URLs accept: region, endpoint, path_style"},
		{"s3://elections", "no key"},
		{"s3:///k", "no bucket"},
		{"gs://b", "no object name"},
		{"gs://b/o?acl=x", "gs URLs accept: kms_key_name, min_write_interval, predefined_acl"},
		{"gs://b/o?min_write_interval=soon", `min_write_interval "soon"`},
		{"gs://b/o?predefined_acl=everyone", `predefined ACL "everyone"`},
	} {
		var stdout, stderr bytes.Buffer
		o := dispatch([]string{"status", "--store", tc.url}, &stdout, &stderr)
		if o.code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("status --store %s: exit %+v, want %d with %q:\n%s", tc.url, o, exitUsage, tc.want, &stderr)
		}
	}
}
