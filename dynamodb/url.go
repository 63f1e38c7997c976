package dynamodb

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// Scheme is the URL scheme this package registers with
// leaderelection.RegisterScheme:
//
//	dynamodb://TABLE/KEY[?region=R&endpoint=URL]
//
// leaderelection.OpenDecider loads the AWS SDK's default configuration
// (environment, shared config and credentials files, instance roles) with
// config.LoadDefaultConfig. region overrides the configured region;
// endpoint sets the client's base endpoint, for DynamoDB Local
// ("http://127.0.0.1:8000"). The key is the URL's path without its leading
// slash, percent-decoded; the table's partition key attribute must be
// DefaultKeyAttribute, as CreateTable makes it. No other query parameter is
// accepted, nor one given twice or empty ("endpoint="), a fragment, user
// information or a port; for a sort key, another key attribute or any other
// client setting, call NewDecider with a client of your own.
const Scheme = "dynamodb"

func init() {
	leaderelection.RegisterScheme(Scheme, leaderelection.URLOpener{
		Open:   openURL,
		Params: []string{"region", "endpoint"},
		Form:   "dynamodb://TABLE/KEY?region=R&endpoint=URL",
	})
}

func openURL(ctx context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
	if err := urlcheck.Check(u); err != nil {
		return nil, fmt.Errorf("%w: %w; want dynamodb://TABLE/KEY", leaderelection.ErrBadURL, err)
	}
	table, key := u.Host, strings.TrimPrefix(u.Path, "/")
	switch {
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: want dynamodb://TABLE/KEY", leaderelection.ErrBadURL)
	case table == "":
		return nil, fmt.Errorf("%w: no table; want dynamodb://TABLE/KEY", leaderelection.ErrBadURL)
	case u.Port() != "":
		return nil, fmt.Errorf("%w: table %q has a port: the host is the table name; for DynamoDB Local at that address, use dynamodb://TABLE/KEY?endpoint=http://%s",
			leaderelection.ErrBadURL, table, table)
	case key == "":
		return nil, fmt.Errorf("%w: no key; want dynamodb://TABLE/KEY", leaderelection.ErrBadURL)
	}
	q := u.Query()
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
		return nil, fmt.Errorf("dynamodb: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: no AWS region: add ?region=REGION to the URL, or set AWS_REGION", leaderelection.ErrBadURL)
	}
	client := ddb.NewFromConfig(cfg, func(o *ddb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	d, err := NewDecider(client, table, key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	return d, nil
}
