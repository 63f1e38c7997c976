package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/racedecider/leaderelection/entry"
)

// DefaultTimeout bounds each ReadCurrent and WriteEntry call, SDK retries
// included, unless WithTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// DefaultKeyAttribute is the name of the table's partition key attribute
// unless WithKeyAttribute says otherwise. CreateTable makes tables keyed on it.
const DefaultKeyAttribute = "pk"

// The attributes the Decider keeps in the item beside its key.
const (
	// attrRecord holds the record as entry.Marshal encodes it: versioned
	// and checksummed, so that a hand-edited or foreign item is reported
	// as corrupt instead of being misread.
	attrRecord = "record"
	// attrVersion is a number that every write increments; writes are
	// conditioned on it.
	attrVersion = "version"
	// attrWriteID repeats the record's write id, so that a condition can
	// test it and a refused write can recognise its own earlier attempt.
	attrWriteID = "write_id"
)

// Decider is a leaderelection.RaceDecider that keeps the election record in
// one DynamoDB item. It is safe for concurrent use. It does not implement
// leaderelection.ChangeNotifier: candidates and watchers poll.
type Decider struct {
	client *ddb.Client
	// creds is the client's credentials provider, which classify asks
	// whether an expired session token can be replaced.
	creds    aws.CredentialsProvider
	table    string
	key      string
	keyAttr  string
	sortAttr string // "" when the table has no sort key
	sortKey  string
	name     string
	timeout  time.Duration
}

// Option configures a Decider.
type Option func(*Decider)

// WithTimeout bounds each ReadCurrent and WriteEntry call, including the
// SDK's retries, to d (DefaultTimeout when not given). It keeps a candidate
// whose connection hangs without an error from waiting on it indefinitely
// when its context has no deadline. Zero means no bound but the context's.
func WithTimeout(d time.Duration) Option {
	return func(dc *Decider) { dc.timeout = d }
}

// WithKeyAttribute names the table's partition key attribute, a string
// (DefaultKeyAttribute when not given). Use it to keep elections in a table
// that already exists for other items.
func WithKeyAttribute(name string) Option {
	return func(dc *Decider) { dc.keyAttr = name }
}

// WithSortKey is for a table whose key schema has a sort key: attr is that
// (string) attribute's name and value the sort key of the election's item.
func WithSortKey(attr, value string) Option {
	return func(dc *Decider) { dc.sortAttr, dc.sortKey = attr, value }
}

// tableName is DynamoDB's rule for table names.
var tableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// NewDecider returns a Decider for the election whose partition key is key
// in table, accessed through client. The table must exist (see CreateTable);
// the item is created by the first election.
//
// For DynamoDB Local or another endpoint, point the client at it:
//
//	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
//		o.BaseEndpoint = aws.String("http://127.0.0.1:8000")
//	})
func NewDecider(client *ddb.Client, table, key string, opts ...Option) (*Decider, error) {
	d := &Decider{
		client:  client,
		table:   table,
		key:     key,
		keyAttr: DefaultKeyAttribute,
		timeout: DefaultTimeout,
	}
	for _, o := range opts {
		o(d)
	}
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("client is nil"))
	} else {
		d.creds = client.Options().Credentials
	}
	if !tableName.MatchString(table) {
		errs = append(errs, fmt.Errorf("table %q is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, '_', '-', '.')", table))
	}
	// DynamoDB's limits: a partition key of 1 to 2048 bytes, a sort key of
	// 1 to 1024.
	if key == "" || len(key) > 2048 {
		errs = append(errs, fmt.Errorf("key %q must be 1 to 2048 bytes long", key))
	}
	// DynamoDB strings are UTF-8, and the SDK's JSON encoding replaces each
	// byte that is not with U+FFFD: two such keys would name one item, and
	// their elections share one record.
	for _, f := range [][2]string{{"key", key}, {"key attribute", d.keyAttr}, {"sort key attribute", d.sortAttr}, {"sort key", d.sortKey}} {
		if !utf8.ValidString(f[1]) {
			errs = append(errs, fmt.Errorf("%s %q is not valid UTF-8, as DynamoDB names must be", f[0], f[1]))
		}
	}
	names := map[string]bool{attrRecord: true, attrVersion: true, attrWriteID: true}
	if d.keyAttr == "" || names[d.keyAttr] {
		errs = append(errs, fmt.Errorf("key attribute %q is empty or one of the attributes the record uses (record, version, write_id)", d.keyAttr))
	}
	if d.sortAttr != "" || d.sortKey != "" {
		if d.sortAttr == "" || d.sortAttr == d.keyAttr || names[d.sortAttr] {
			errs = append(errs, fmt.Errorf("sort key attribute %q is empty, the key attribute, or one of the attributes the record uses (record, version, write_id)", d.sortAttr))
		}
		if d.sortKey == "" || len(d.sortKey) > 1024 {
			errs = append(errs, fmt.Errorf("sort key %q must be 1 to 1024 bytes long", d.sortKey))
		}
	}
	if d.timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s is negative", d.timeout))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("dynamodb: NewDecider(%q, %q): %w", table, key, errors.Join(errs...))
	}
	d.name = "dynamodb://" + table + "/" + key
	if d.sortAttr != "" {
		d.name += " (" + d.sortAttr + "=" + d.sortKey + ")"
	}
	return d, nil
}

// String names the item: dynamodb://TABLE/KEY, followed by the sort key
// when there is one.
func (d *Decider) String() string { return d.name }

// itemKey is the item's primary key.
func (d *Decider) itemKey() map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{d.keyAttr: &types.AttributeValueMemberS{Value: d.key}}
	if d.sortAttr != "" {
		k[d.sortAttr] = &types.AttributeValueMemberS{Value: d.sortKey}
	}
	return k
}

// ReadCurrent implements leaderelection.RaceDecider with a strongly
// consistent GetItem. A missing item reads as entry.NoElections; a missing
// table is an error wrapping entry.ErrRefused. The token's CommitTime is
// zero: DynamoDB does not say when an item was written.
func (d *Decider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dynamodb: read %s: %w", d.name, err)
	}
	opCtx, cancel := d.opContext(ctx)
	defer cancel()
	out, err := d.client.GetItem(opCtx, &ddb.GetItemInput{
		TableName: aws.String(d.table),
		Key:       d.itemKey(),
		// An eventually consistent read may miss the latest write. The
		// engine reads back its own ambiguous writes and would then take
		// an applied write for a failed one (and wait out a term it
		// holds); candidates would write on stale versions, only to lose.
		// A strongly consistent read costs one read unit instead of half.
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, d.fail(ctx, opCtx, "read "+d.name, err, nil)
	}
	if why := notDynamoDB(answerOf(out.ResultMetadata)); why != "" {
		return nil, fmt.Errorf("dynamodb: read %s: %w: %s", d.name, entry.ErrRefused, why)
	}
	if out.Item == nil {
		return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
	}
	e, version, err := d.decodeItem(out.Item)
	if err != nil {
		return nil, err
	}
	e.Token = entry.LeaderToken{Version: token(version, e.WriteID)}
	return e, nil
}

// decodeItem decodes the record and version of an item, reporting anything
// it cannot use as entry.ErrCorruptRecord naming the item.
func (d *Decider) decodeItem(item map[string]types.AttributeValue) (*entry.RaceEntry, int64, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("dynamodb: item %s: %w: %s", d.name, entry.ErrCorruptRecord, fmt.Sprintf(format, args...))
	}
	rec, ok := item[attrRecord].(*types.AttributeValueMemberB)
	if !ok {
		return nil, 0, corrupt("no binary attribute %q", attrRecord)
	}
	num, ok := item[attrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return nil, 0, corrupt("no number attribute %q", attrVersion)
	}
	version, err := strconv.ParseInt(num.Value, 10, 64)
	if err != nil || version < 1 {
		return nil, 0, corrupt("attribute %q is %s, not a positive integer", attrVersion, num.Value)
	}
	e, err := entry.Unmarshal(rec.Value)
	if err != nil {
		return nil, 0, fmt.Errorf("dynamodb: item %s (version %d): %w", d.name, version, err)
	}
	wid, ok := item[attrWriteID].(*types.AttributeValueMemberS)
	if !ok || wid.Value != e.WriteID {
		return nil, 0, corrupt("attribute %q does not match the record's write id %q", attrWriteID, e.WriteID)
	}
	return e, version, nil
}

// token is the LeaderToken version of an item: its version number and write
// id. The write id is there because a version number alone would repeat if
// the item were deleted and created again, and a writer holding a token of
// the deleted item could then overwrite the new one.
func token(version int64, writeID string) string {
	return strconv.FormatInt(version, 10) + ":" + writeID
}

// parseToken splits a token made by token.
func parseToken(v string) (version int64, writeID string, err error) {
	num, wid, ok := strings.Cut(v, ":")
	if ok {
		version, err = strconv.ParseInt(num, 10, 64)
	}
	if !ok || err != nil || version < 1 {
		return 0, "", fmt.Errorf("token %q was not made by this backend (want VERSION:WRITEID)", v)
	}
	return version, wid, nil
}

// WriteEntry implements leaderelection.RaceDecider with a conditional
// PutItem: attribute_not_exists on the key when rentry.Token is zero, and
// otherwise the version and write id of the token. It returns the new
// version as the token, with the response's Date as CommitTime.
//
// A failed condition (ConditionalCheckFailedException) gives an error
// wrapping entry.ErrRaceLost when no earlier attempt of the SDK's may have
// been applied. When one may have been (the SDK retried after a timeout, a
// reset or a 5xx), the item DynamoDB returns with the refusal tells: if it
// is the record of this very write, the write was applied and WriteEntry
// succeeds; if not, the outcome is reported as unknown, since our write may
// have been applied and replaced since.
//
// The record must have a WriteID: the conditions and the resolution of SDK
// retries depend on it.
func (d *Decider) WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error) {
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("dynamodb: write %s: %w", d.name, err)
	}
	if rentry.WriteID == "" {
		return entry.LeaderToken{}, fmt.Errorf("dynamodb: write %s: %w: the record has no WriteID; conditions and retries depend on it", d.name, entry.ErrRefused)
	}
	body, err := entry.Marshal(rentry)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("dynamodb: write %s: %w", d.name, err)
	}
	version := int64(1)
	item := d.itemKey()
	in := &ddb.PutItemInput{
		TableName: aws.String(d.table),
		Item:      item,
		// With the refusal comes the item that made the condition fail,
		// which tells a retried write of our own from a lost race without
		// another read.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	var cond string
	if rentry.Token.IsZero() {
		in.ConditionExpression = aws.String("attribute_not_exists(#k)")
		in.ExpressionAttributeNames = map[string]string{"#k": d.keyAttr}
		cond = "create"
	} else {
		old, oldWID, err := parseToken(rentry.Token.Version)
		if err != nil {
			return entry.LeaderToken{}, fmt.Errorf("dynamodb: write %s: %w", d.name, err)
		}
		version = old + 1
		in.ConditionExpression = aws.String("#v = :v AND #w = :w")
		in.ExpressionAttributeNames = map[string]string{"#v": attrVersion, "#w": attrWriteID}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(old, 10)},
			":w": &types.AttributeValueMemberS{Value: oldWID},
		}
		cond = "replace version " + rentry.Token.Version
	}
	item[attrRecord] = &types.AttributeValueMemberB{Value: body}
	item[attrVersion] = &types.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}
	item[attrWriteID] = &types.AttributeValueMemberS{Value: rentry.WriteID}
	tok := token(version, rentry.WriteID)

	opCtx, cancel := d.opContext(ctx)
	defer cancel()
	attempts := attemptLog{creds: d.creds}
	out, err := d.client.PutItem(opCtx, in, ddb.WithAPIOptions(attempts.install))
	what := "write " + d.name + " (" + cond + ")"
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) && attempts.ambiguous.Load() {
			if d.isOurs(ccf.Item, version, rentry.WriteID) {
				// An earlier attempt was applied; the retry was refused
				// because of it. The refusal's Date is DynamoDB's clock
				// after that commit, within this call: as good a
				// sample of its clock as the write's own answer.
				return entry.LeaderToken{Version: tok, CommitTime: responseDate(err)}, nil
			}
			return entry.LeaderToken{}, fmt.Errorf("dynamodb: %s: outcome unknown: the SDK retried after an attempt that may have been applied, and the retry found another record (%d attempts): %w",
				what, attempts.n.Load(), err)
		}
		return entry.LeaderToken{}, d.fail(ctx, opCtx, what, err, &attempts)
	}
	if why := notDynamoDB(answerOf(out.ResultMetadata)); why != "" {
		if attempts.ambiguous.Load() {
			// The answer is to the SDK's retry: an earlier attempt may
			// have been applied.
			return entry.LeaderToken{}, fmt.Errorf("dynamodb: %s: outcome unknown: the SDK retried after an attempt that may have been applied (%d attempts), and %s",
				what, attempts.n.Load(), why)
		}
		return entry.LeaderToken{}, fmt.Errorf("dynamodb: %s: %w: %s", what, entry.ErrRefused, why)
	}
	commit, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
	return entry.LeaderToken{Version: tok, CommitTime: commit}, nil
}

// isOurs reports whether item is the one this write stores.
func (d *Decider) isOurs(item map[string]types.AttributeValue, version int64, writeID string) bool {
	v, ok1 := item[attrVersion].(*types.AttributeValueMemberN)
	w, ok2 := item[attrWriteID].(*types.AttributeValueMemberS)
	return ok1 && ok2 && v.Value == strconv.FormatInt(version, 10) && w.Value == writeID
}

// opContext bounds one call by d.timeout.
func (d *Decider) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.timeout)
}

// fail wraps err from the DynamoDB call described by what with its class
// (see classify), making sure the result wraps the caller's ctx.Err() when
// the caller's context ended, and saying so when the call's own timeout ran
// out. For a write (attempts not nil), a class is claimed only when no
// attempt of the call may have been applied.
func (d *Decider) fail(ctx, opCtx context.Context, what string, err error, attempts *attemptLog) error {
	err = withoutCanonicalRequest(err)
	switch {
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("dynamodb: %s: %w: %w", what, ctx.Err(), err)
	case ctx.Err() == nil && opCtx.Err() != nil:
		return fmt.Errorf("dynamodb: %s: no answer within %s (see WithTimeout): %w", what, d.timeout, err)
	}
	class := classify(err, d.creds)
	switch {
	case class == nil:
		return fmt.Errorf("dynamodb: %s: %w", what, err)
	case attempts != nil && attempts.ambiguous.Load():
		return fmt.Errorf("dynamodb: %s: outcome unknown: the SDK retried after an attempt that may have been applied (%d attempts): %w",
			what, attempts.n.Load(), err)
	case errors.Is(class, entry.ErrRefused) && isMissingTable(err):
		return fmt.Errorf("dynamodb: %s: %w: table %q does not exist in this account and region (create it first, see CreateTable): %w",
			what, class, d.table, err)
	}
	return fmt.Errorf("dynamodb: %s: %w: %w", what, class, err)
}

// attemptLog records the attempts the SDK makes for one operation.
type attemptLog struct {
	creds aws.CredentialsProvider // the client's, for classify
	n     atomic.Int32
	// ambiguous is set once an attempt ended in a way that does not prove
	// it was not applied: a timeout, a reset, a 5xx.
	ambiguous atomic.Bool
}

// install adds a middleware that sees each attempt: it sits after the retry
// middleware, so it runs once per attempt, and sees its decoded error.
func (l *attemptLog) install(st *middleware.Stack) error {
	return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("leaderelectionAttemptLog",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			l.n.Add(1)
			out, md, err := next.HandleFinalize(ctx, in)
			if err != nil && classify(err, l.creds) == nil {
				l.ambiguous.Store(true)
			}
			return out, md, err
		}), middleware.After)
}
