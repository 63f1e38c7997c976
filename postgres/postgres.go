package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
)

// DefaultTimeout bounds each ReadCurrent and WriteEntry call, waiting for a
// pooled connection included, unless WithTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// maxIdentifier is PostgreSQL's longest identifier (NAMEDATALEN - 1 bytes);
// the server silently truncates longer ones, which would name another table.
const maxIdentifier = 63

// maxElection bounds an election's name: it is a row key, not a document.
const maxElection = 1024

// Decider is a leaderelection.RaceDecider and leaderelection.ChangeNotifier
// keeping one election's record in one row of a PostgreSQL table. It is safe
// for concurrent use. Create it with New; Close it to stop its listener
// connection.
type Decider struct {
	pool     *pgxpool.Pool
	ownPool  bool // opened from a URL: Close closes it
	table    pgx.Identifier
	election string
	name     string // for errors: postgres table "t" row "election" on host:port/db
	channel  string
	timeout  time.Duration
	backoff  backoff.Backoff

	readSQL, createSQL, replaceSQL string

	mu     sync.Mutex
	ln     *listener // started by the first WaitForChange
	closed bool
}

// Option configures a Decider.
type Option func(*Decider)

// WithTimeout bounds each ReadCurrent and WriteEntry call to d
// (DefaultTimeout when not given), waiting for a connection from the pool
// included, so that a hung connection does not stall a candidate whose
// context has no deadline. Zero means no bound but the context's.
func WithTimeout(d time.Duration) Option {
	return func(dc *Decider) { dc.timeout = d }
}

// New returns a Decider keeping the record of the election named election in
// table, through pool. table is a table name, optionally qualified by its
// schema ("leader_elections", "ops.leader_elections"); each part is used as
// written, quoted, so it is case-sensitive. The table must exist (see
// CreateTable); the row is created by the first election.
func New(pool *pgxpool.Pool, table, election string, opts ...Option) (*Decider, error) {
	var errs []error
	if pool == nil {
		errs = append(errs, errors.New("pool is nil"))
	}
	ident, err := parseTable(table)
	if err != nil {
		errs = append(errs, err)
	}
	switch {
	case election == "":
		errs = append(errs, errors.New(`election name is empty ("")`))
	case len(election) > maxElection:
		errs = append(errs, fmt.Errorf("election name %.40q... is %d bytes long, more than %d", election, len(election), maxElection))
	case !utf8.ValidString(election) || strings.ContainsRune(election, 0):
		errs = append(errs, fmt.Errorf("election name %q is not valid UTF-8 text without NUL bytes", election))
	}
	name := fmt.Sprintf("postgres table %s row %q", ident.Sanitize(), election)
	if pool != nil {
		// The server too, so that elections in two databases do not read
		// alike in logs and metrics.
		cc := pool.Config().ConnConfig
		name += fmt.Sprintf(" on %s/%s", net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), cc.Database)
	}
	d := &Decider{
		pool:     pool,
		table:    ident,
		election: election,
		name:     name,
		timeout:  DefaultTimeout,
		backoff:  defaultBackoff,
	}
	for _, o := range opts {
		o(d)
	}
	if d.timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s is negative", d.timeout))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("postgres: New(table %q, election %q): %w", table, election, errors.Join(errs...))
	}
	d.channel = channelName(ident, election)
	t := ident.Sanitize()
	d.readSQL = "SELECT version, record, committed_at, secret FROM " + t + " WHERE name = $1"
	// clock_timestamp(), not now(): now() is the time the statement's
	// transaction began, which precedes any wait for the row lock held by a
	// concurrent writer, while clock_timestamp() in the SET or VALUES list is
	// evaluated once the row is ours, as close to the commit as SQL can
	// get. Either falls between sending the write and its reply.
	//
	// pg_notify runs in the same statement, once per row written: no row, no
	// notification, and PostgreSQL sends it only if the statement commits.
	// Its payload is the change itself, signed with the row's secret (see
	// notifySQL), or, for a record too large for a notification, the bare
	// new version.
	d.createSQL = "WITH w AS (INSERT INTO " + t + " (name, version, record, committed_at, secret)" +
		" VALUES ($1, $3, $4, clock_timestamp(), $7) ON CONFLICT (name) DO NOTHING RETURNING committed_at, secret)" +
		notifySQL
	d.replaceSQL = "WITH w AS (UPDATE " + t + " SET version = $3, record = $4, committed_at = clock_timestamp()" +
		" WHERE name = $1 AND version = $2 RETURNING committed_at, secret)" +
		notifySQL
	return d, nil
}

// parseTable splits "table" or "schema.table" into a quoted identifier.
func parseTable(table string) (pgx.Identifier, error) {
	parts := strings.Split(table, ".")
	if table == "" || len(parts) > 2 {
		return nil, fmt.Errorf(`table %q is not a table name ("table" or "schema.table")`, table)
	}
	for _, p := range parts {
		switch {
		case p == "":
			return nil, fmt.Errorf(`table %q has an empty part; want "table" or "schema.table"`, table)
		case len(p) > maxIdentifier:
			return nil, fmt.Errorf("table %q: %q is longer than PostgreSQL's %d-byte identifiers", table, p, maxIdentifier)
		case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
			return nil, fmt.Errorf("table %q is not valid UTF-8 without NUL bytes", table)
		}
	}
	return pgx.Identifier(parts), nil
}

// notifySQL ends both writes, whose parameters are $1 the election, $2 the
// version replaced (0 for a create), $3 the new version, $4 the record, $5
// the channel and $6 the record in base64 (NULL when too large to push); a
// create adds $7, the new row's secret. It sends
//
//	lev1 PREV NEXT MICROS RECORD MAC
//
// where MICROS is the commit time in microseconds since the Unix epoch and
// MAC, in hex, is SHA-256(k2 || SHA-256(k1 || the text before it)), k1 and k2
// being the two halves of the row's secret: a keyed hash with two
// independent keys, which PostgreSQL's built-in sha256 (version 11 and
// later) can compute without an extension. Any role may NOTIFY, but only
// one that can read the row knows its secret.
const notifySQL = " SELECT committed_at, pg_notify($5, coalesce(m || ' ' || encode(" +
	"sha256(substr(secret, 65, 64) || sha256(substr(secret, 1, 64) || convert_to(m, 'UTF8'))), 'hex'), $3::text))" +
	" FROM (SELECT committed_at, secret, 'lev1 ' || $2::bigint || ' ' || $3::bigint || ' ' ||" +
	" (extract(epoch FROM committed_at) * 1000000)::bigint || ' ' || $6::text AS m FROM w) s"

// secretSize is the size of a row's secret: two 64-byte keys, one per
// SHA-256 block.
const secretSize = 128

// maxPushed bounds the base64 record a notification carries: PostgreSQL
// refuses payloads of 8000 bytes or more, and the rest of the payload takes
// under 150.
const maxPushed = 7800

// channelName derives the NOTIFY channel of an election. It hashes the names
// so that the channel is a plain lower-case identifier of at most 63 bytes,
// whatever the names are. Only the table's own name counts, not its schema,
// so that writers naming "elections" and "public.elections" share one
// channel; two elections that collide merely wake each other's waiters, who
// read their own row and go back to waiting.
func channelName(table pgx.Identifier, election string) string {
	sum := sha256.Sum256([]byte(table[len(table)-1] + "\x00" + election))
	return "leaderelection_" + hex.EncodeToString(sum[:16])
}

// String returns the name errors, logs and metrics use for the election's
// row: postgres table "schema"."table" row "election" on HOST:PORT/DATABASE.
func (d *Decider) String() string { return d.name }

// CreateTable creates table, as documented in the package comment, unless it
// exists already. The role needs the CREATE privilege on the schema. It does
// not check the columns of an existing table. Concurrent calls are safe.
func CreateTable(ctx context.Context, pool *pgxpool.Pool, table string) error {
	ident, err := parseTable(table)
	if err != nil {
		return fmt.Errorf("postgres: CreateTable: %w", err)
	}
	if pool == nil {
		return errors.New("postgres: CreateTable: pool is nil")
	}
	_, err = pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+ident.Sanitize()+` (
	name         text        PRIMARY KEY,
	version      bigint      NOT NULL,
	record       bytea       NOT NULL,
	committed_at timestamptz NOT NULL,
	secret       bytea       NOT NULL
)`)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42710") {
		// Concurrent CREATE TABLE IF NOT EXISTS can both pass the check and
		// then collide on the table (duplicate_table), its row type
		// (duplicate_object) or the catalog's index (unique_violation): the
		// table exists either way.
		return nil
	}
	if err != nil {
		if class := errorClass(err); class != nil {
			return fmt.Errorf("postgres: create table %s: %w: %w", ident.Sanitize(), class, err)
		}
		return fmt.Errorf("postgres: create table %s: %w", ident.Sanitize(), err)
	}
	return nil
}

// ReadCurrent implements leaderelection.RaceDecider: it reads the row. A
// missing row reads as entry.NoElections; a missing table is an error
// wrapping entry.ErrRefused. The token's CommitTime is the server's clock
// when the row was written.
func (d *Decider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	e, _, err := d.read(ctx)
	return e, err
}

// read is ReadCurrent, also returning the row's secret (nil for no row).
func (d *Decider) read(ctx context.Context) (*entry.RaceEntry, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("postgres: read %s: %w", d.name, err)
	}
	opCtx, cancel := d.opContext(ctx)
	defer cancel()
	var (
		// Pointers, for a row written by something else into a table
		// whose columns allow NULL: a NULL is a corrupt record, where a
		// failed scan would be an unknown error read again for ever.
		version      *int64
		data, secret []byte
		commit       *time.Time
	)
	err := d.queryRow(opCtx, d.readSQL, []any{d.election}, &version, &data, &commit, &secret)
	if errors.Is(err, pgx.ErrNoRows) {
		return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil, nil
	}
	if err != nil {
		return nil, nil, d.fail(ctx, opCtx, "read "+d.name, err, false)
	}
	switch {
	case version == nil:
		return nil, nil, fmt.Errorf("postgres: record in %s: %w: version is NULL", d.name, entry.ErrCorruptRecord)
	case commit == nil:
		return nil, nil, fmt.Errorf("postgres: record in %s (version %d): %w: committed_at is NULL", d.name, *version, entry.ErrCorruptRecord)
	}
	e, err := entry.Unmarshal(data)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: record in %s (version %d): %w", d.name, *version, err)
	}
	e.Token = entry.LeaderToken{Version: strconv.FormatInt(*version, 10), CommitTime: *commit}
	return e, secret, nil
}

// WriteEntry implements leaderelection.RaceDecider: INSERT ... ON CONFLICT DO
// NOTHING when rentry.Token is zero, UPDATE ... WHERE version = token
// otherwise, each with a new random version and a pg_notify to the
// election's channel. A statement that wrote no row returns an error wrapping
// entry.ErrRaceLost. See the package comment for the other error classes.
func (d *Decider) WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error) {
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("postgres: write %s: %w", d.name, err)
	}
	body, err := entry.Marshal(rentry)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("postgres: write %s: %w", d.name, err)
	}
	// A random version rather than version + 1: a row deleted and created
	// again by hand would restart a counter, and a stale writer holding an
	// old token could then win against a record it never saw.
	version := mrand.Int64N(math.MaxInt64) + 1
	next := strconv.FormatInt(version, 10)
	opCtx, cancel := d.opContext(ctx)
	defer cancel()
	var pushed *string // NULL: the notification carries the version alone
	if base64.StdEncoding.EncodedLen(len(body)) <= maxPushed {
		b64 := base64.StdEncoding.EncodeToString(body)
		pushed = &b64
	}
	var commit time.Time
	cond := "create"
	if rentry.Token.IsZero() {
		secret := make([]byte, secretSize)
		rand.Read(secret)
		err = d.queryRow(opCtx, d.createSQL, []any{d.election, int64(0), version, body, d.channel, pushed, secret}, &commit, nil)
	} else {
		old, perr := strconv.ParseInt(rentry.Token.Version, 10, 64)
		if perr != nil {
			return entry.LeaderToken{}, fmt.Errorf("postgres: write %s: token %q was not made by this backend (want a decimal version)", d.name, rentry.Token.Version)
		}
		cond = "replace version " + rentry.Token.Version
		err = d.queryRow(opCtx, d.replaceSQL, []any{d.election, old, version, body, d.channel, pushed}, &commit, nil)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return entry.LeaderToken{}, fmt.Errorf("postgres: write %s (%s): %w", d.name, cond, entry.ErrRaceLost)
	}
	if err != nil {
		return entry.LeaderToken{}, d.fail(ctx, opCtx, "write "+d.name+" ("+cond+")", err, true)
	}
	return entry.LeaderToken{Version: next, CommitTime: commit}, nil
}

// queryRow runs sql with args on a connection from d's pool and scans its
// one row into dest. A connection that answered read_only_sql_transaction
// (25006: a server that is, or has become, a standby after a failover, or a
// session with default_transaction_read_only) is closed rather than returned
// to the pool, so that the engine's retry, after its backoff, connects anew:
// to the new primary once the failover has moved the host name, which
// target_session_attrs=read-write makes sure of.
//
// A call that gets no connection (the pool's are all busy until ctx's
// deadline, or a new one cannot be opened) sent nothing: its error is a
// notSent, which fail classes as throttled rather than unknown.
func (d *Decider) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return notSent{err}
	}
	defer c.Release() // destroys a closed connection
	err = c.QueryRow(ctx, sql, args...).Scan(dest...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "25006" {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.Conn().Close(closeCtx)
		cancel()
	}
	return err
}

// notSent is the error of a statement that was never sent, for want of a
// connection.
type notSent struct{ err error }

func (e notSent) Error() string { return "no connection from the pool: " + e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// opContext bounds one call by d.timeout.
func (d *Decider) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.timeout)
}

// fail wraps err from the statement described by what: with the caller's
// ctx.Err() when the caller's context ended, with its class (errorClass)
// when the server's answer proves the statement was not applied, and, for a
// write, saying the outcome is unknown otherwise.
func (d *Decider) fail(ctx, opCtx context.Context, what string, err error, write bool) error {
	var ns notSent
	switch {
	case errors.Is(err, puddle.ErrClosedPool):
		// Closed by the caller, or by Close on a Decider opened from a
		// URL: no retry can get a connection.
		return fmt.Errorf("postgres: %s: %w: the connection pool is closed: %w", what, entry.ErrRefused, err)
	case errors.As(err, &ns) && errorClass(err) == nil:
		// Nothing was sent, so nothing applied, whichever deadline
		// passed first (the caller's too: an engine write's ends with
		// the term): back off and retry. (The pool may be shared with
		// work that holds its connections: give the Decider a small
		// pool of its own.) err wraps the context's error, if any.
		return fmt.Errorf("postgres: %s: %w: %w", what, entry.ErrThrottled, err)
	case ctx.Err() != nil:
		if errors.Is(err, ctx.Err()) {
			return fmt.Errorf("postgres: %s: %w", what, err)
		}
		return fmt.Errorf("postgres: %s: %w: %w", what, ctx.Err(), err)
	}
	if class := errorClass(err); class != nil {
		return fmt.Errorf("postgres: %s: %w: %w%s", what, class, err, fix(err))
	}
	if opCtx.Err() != nil {
		return fmt.Errorf("postgres: %s: no answer within %s (see WithTimeout): %w", what, d.timeout, err)
	}
	if write {
		return fmt.Errorf("postgres: %s: outcome unknown: %w", what, err)
	}
	return fmt.Errorf("postgres: %s: %w", what, err)
}

// Close stops the listener connection WaitForChange uses, if it was started,
// and closes the pool if the Decider was opened from a URL (a pool given to
// New is the caller's to close). ReadCurrent and WriteEntry go on working
// on a caller's pool; WaitForChange fails from then on. Close always returns
// nil; it has an error result to be an io.Closer.
func (d *Decider) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	ln := d.ln
	d.mu.Unlock()
	if ln != nil {
		ln.stop()
	}
	if d.ownPool {
		d.pool.Close()
	}
	return nil
}
