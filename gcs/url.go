package gcs

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/storage"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// Scheme is the URL scheme this package registers with
// leaderelection.RegisterScheme:
//
//	gs://BUCKET/OBJECT[?kms_key_name=K&predefined_acl=A&min_write_interval=D]
//
// leaderelection.OpenDecider makes a client with storage.NewClient and
// Application Default Credentials (honouring STORAGE_EMULATOR_HOST), which
// lives as long as the process. The object name is the URL's path without
// its leading slash, percent-decoded. kms_key_name sets WithKMSKeyName,
// predefined_acl WithPredefinedACL and min_write_interval (a Go duration,
// "0" for an emulator) WithMinWriteInterval; no other query parameter is
// accepted, nor one given twice or empty ("kms_key_name="), a fragment
// (gs://BUCKET/OBJECT#GENERATION names a record in errors, not an object to
// open), user information or a port.
// For any other client setting, call NewDecider with a client of your own.
const Scheme = "gs"

func init() {
	leaderelection.RegisterScheme(Scheme, leaderelection.URLOpener{
		Open:   openURL,
		Params: []string{"kms_key_name", "min_write_interval", "predefined_acl"},
		Form:   "gs://BUCKET/OBJECT",
	})
}

func openURL(ctx context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
	if err := urlcheck.Check(u); err != nil {
		return nil, fmt.Errorf("%w: %w; want gs://BUCKET/OBJECT", leaderelection.ErrBadURL, err)
	}
	bucket, object := u.Host, strings.TrimPrefix(u.Path, "/")
	switch {
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: want gs://BUCKET/OBJECT", leaderelection.ErrBadURL)
	case bucket == "":
		return nil, fmt.Errorf("%w: no bucket; want gs://BUCKET/OBJECT", leaderelection.ErrBadURL)
	case u.Port() != "":
		return nil, fmt.Errorf("%w: bucket %q has a port: the host is the bucket name; for an emulator at that address, set STORAGE_EMULATOR_HOST=%s",
			leaderelection.ErrBadURL, bucket, bucket)
	case object == "":
		return nil, fmt.Errorf("%w: no object name; want gs://BUCKET/OBJECT", leaderelection.ErrBadURL)
	}
	var opts []Option
	q := u.Query()
	if k := q.Get("kms_key_name"); k != "" {
		opts = append(opts, WithKMSKeyName(k))
	}
	if a := q.Get("predefined_acl"); a != "" {
		opts = append(opts, WithPredefinedACL(a))
	}
	if v := q.Get("min_write_interval"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%w: min_write_interval %q is not a duration such as 1s or 0", leaderelection.ErrBadURL, v)
		}
		opts = append(opts, WithMinWriteInterval(d))
	}
	// The client outlives this call: it must not end with ctx.
	client, err := storage.NewClient(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("gcs: creating a Cloud Storage client with Application Default Credentials: %w", err)
	}
	d, err := NewDecider(client, bucket, object, opts...)
	if err != nil {
		client.Close()
		// The client is fine, so the URL is at fault.
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	return d, nil
}
