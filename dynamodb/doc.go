// Package dynamodb is a leaderelection.RaceDecider on Amazon DynamoDB, using
// conditional writes.
//
// It is a module of its own (github.com/racedecider/leaderelection/dynamodb),
// so that programs that do not use it do not download the DynamoDB SDK.
//
// One item per election holds the record: its partition key is the
// election's key, in a table you name (optionally with a sort key, see
// WithSortKey). Beside the key the item has three attributes: record (B, the
// record as entry.Marshal encodes it, versioned and checksummed, so that a
// damaged or foreign item is reported as corrupt), version (N, +1 on every
// write) and write_id (S, the record's write id).
//
// ReadCurrent reads the item with a strongly consistent GetItem. WriteEntry
// replaces it with a conditional PutItem: attribute_not_exists on the key
// for the first write, version and write_id equal to the token's for every
// later one. DynamoDB applies a condition and its write atomically, so of
// any number of concurrent writers conditioned on the same token one
// succeeds and the others get ConditionalCheckFailedException, which
// WriteEntry reports as entry.ErrRaceLost. A release is such a conditional
// write too; the item is never deleted.
//
// That holds within one Region. A global table in its default mode
// (multi-Region eventual consistency) checks a condition against the local
// replica only and settles concurrent writes in two Regions by "last writer
// wins", so that candidates writing through two Regions can both lead: give
// every candidate of an election the same Region, or use a global table with
// multi-Region strong consistency.
//
// # Creating a Decider
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	...
//	client := dynamodb.NewFromConfig(cfg)
//	d, err := ledynamodb.NewDecider(client, "elections", "report-job")
//
// The table must exist: a Decider never creates one. CreateTable makes a
// suitable table (partition key "pk", a string; on-demand billing).
//
// # Permissions
//
// The client needs dynamodb:GetItem and dynamodb:PutItem on the table.
// A missing table, denied access or unknown credentials are reported as
// entry.ErrRefused: Acquire ends with the error instead of retrying. So is
// any other 4xx answer but 408 and 429 (DynamoDB did not act on the
// request), among them those of an endpoint that is not DynamoDB at all (an
// HTML page from a proxy, S3's XML, an empty body): the error names the
// endpoint. So is a 2xx answer with neither DynamoDB's request id
// (x-amzn-RequestId) nor its content type (application/x-amz-json-1.0),
// which only another web server gives, and a TLS
// handshake that cannot succeed (plain HTTP on an https:// endpoint, a
// certificate this host does not trust or that names another host; one
// that has expired or is not yet valid, which time cures, is an unknown
// outcome). TransactionConflictException and
// ReplicatedWriteConflictException, 400s that a later attempt may pass, are
// not refusals; nor is ExpiredTokenException when the client's credentials
// are refreshed (the SDK renews them only once this host's clock says they
// have expired, so a request signed as they run out can get it, and the next
// pass). It is a refusal when they never are: static credentials
// (credentials.StaticCredentialsProvider, which is what
// config.LoadDefaultConfig makes of AWS_SESSION_TOKEN or a shared
// credentials file), or an aws.CredentialsCache holding credentials that
// cannot expire.
//
// # Retries and unknown outcomes
//
// The AWS SDK retries a request that failed in transit, with a 5xx status,
// or because it was throttled. If an attempt that timed out or failed with
// a 5xx was in fact applied, the retry fails its own condition because of
// it. WriteEntry asks DynamoDB to return the item with such a refusal
// (ReturnValuesOnConditionCheckFailure ALL_OLD) and recognises its own
// write by version and write id: the write then succeeded, with no extra
// read. A refusal after such an attempt that finds another record is
// reported as an unknown outcome, as is every timeout, reset and 5xx: the
// engine resolves those by reading the record back. Throttling errors wrap
// entry.ErrThrottled, and the engine backs off.
//
// Each ReadCurrent and WriteEntry call, SDK retries included, is bounded by
// DefaultTimeout unless WithTimeout says otherwise.
//
// # Clocks
//
// DynamoDB does not report when an item was written. The token of a write
// carries the Date header of the PutItem response as its CommitTime (the
// store's clock, whole seconds); the token of a read has none.
//
// There is no push notification (DynamoDB Streams would add a second
// service and seconds of lag): this Decider does not implement
// leaderelection.ChangeNotifier, so waiting candidates and watchers poll.
package dynamodb
