package s3

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// Scheme is the URL scheme this package registers with
// leaderelection.RegisterScheme:
//
//	s3://BUCKET/KEY[?region=R&endpoint=URL&path_style=true]
//
// leaderelection.OpenDecider loads the AWS SDK's default configuration
// (environment, shared config and credentials files, instance roles) with
// config.LoadDefaultConfig. region overrides the configured region; endpoint
// sets the client's base endpoint, for S3-compatible stores such as MinIO
// ("http://minio.internal:9000"); path_style=true addresses buckets by path
// rather than host name, as most of those stores need. The key is the URL's
// path without its leading slash, percent-decoded; the bucket carries no
// port. No other query parameter is accepted, nor one given twice
// or empty ("endpoint="), a fragment or user information; for any other
// client setting, call NewDecider with a client of your own.
const Scheme = "s3"

// shape is the URL's shape without its parameters, for errors.
const shape = "s3://BUCKET/KEY"

func init() {
	leaderelection.RegisterScheme(Scheme, leaderelection.URLOpener{
		Open:   openURL,
		Params: []string{"region", "endpoint", "path_style"},
		Form:   "s3://BUCKET/KEY?region=R&endpoint=URL&path_style=true",
	})
}

func openURL(ctx context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
	if err := urlcheck.Check(u); err != nil {
		return nil, fmt.Errorf("%w: %w; want %s", leaderelection.ErrBadURL, err, shape)
	}
	bucket, key := u.Host, strings.TrimPrefix(u.Path, "/")
	switch {
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: want %s", leaderelection.ErrBadURL, shape)
	case bucket == "":
		return nil, fmt.Errorf("%w: no bucket; want %s", leaderelection.ErrBadURL, shape)
	case strings.Contains(bucket, ":"): // a port, or an empty one
		return nil, fmt.Errorf("%w: bucket %q has a port: the host is the bucket name; for an S3-compatible store at that address, use s3://BUCKET/KEY?endpoint=http://%s&path_style=true",
			leaderelection.ErrBadURL, bucket, bucket)
	case key == "":
		return nil, fmt.Errorf("%w: no key; want %s", leaderelection.ErrBadURL, shape)
	}
	q := u.Query()
	pathStyle := false
	if v := q.Get("path_style"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: path_style=%q: want true or false", leaderelection.ErrBadURL, v)
		}
		pathStyle = b
	}
	endpoint := q.Get("endpoint")
	if endpoint != "" {
		if _, err := urlcheck.Endpoint("endpoint", endpoint); err != nil {
			return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
		}
	}
	var loadOpts []func(*config.LoadOptions) error
	if r := q.Get("region"); r != "" {
		if err := urlcheck.Region(r); err != nil {
			return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
		}
		loadOpts = append(loadOpts, config.WithRegion(r))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: no AWS region: add ?region=REGION to the URL, or set AWS_REGION", leaderelection.ErrBadURL)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
	})
	d, err := NewDecider(client, bucket, key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	return d, nil
}
