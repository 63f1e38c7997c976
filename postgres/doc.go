// Package postgres runs leader elections on PostgreSQL: one row per election
// in a table you name, replaced by conditional writes, with LISTEN/NOTIFY to
// tell waiting candidates and watchers of a change at once.
//
//	pool, err := pgxpool.New(ctx, "postgres://app@db.internal/app")
//	...
//	d, err := postgres.New(pool, "leader_elections", "report-job")
//	...
//	defer d.Close()
//	cfg := leaderelection.Config{Decider: d, LeaderID: id, OnElected: run}
//
// # The table
//
// Create it once (CreateTable does exactly this), and grant the role the
// elections run as SELECT, INSERT and UPDATE on it:
//
//	CREATE TABLE IF NOT EXISTS leader_elections (
//	    name         text        PRIMARY KEY,
//	    version      bigint      NOT NULL,
//	    record       bytea       NOT NULL,
//	    committed_at timestamptz NOT NULL,
//	    secret       bytea       NOT NULL
//	);
//	GRANT SELECT, INSERT, UPDATE ON leader_elections TO app;
//
// Many elections share one table, a row each. No superuser feature, extension
// or DELETE privilege is needed, so it works on managed PostgreSQL (RDS,
// Cloud SQL, Azure, Supabase, ...), version 11 or later. A missing table, or
// a missing privilege, is reported as entry.ErrRefused, never as an election
// without a record.
//
// # How the record is stored
//
// The record column holds the record as entry.Marshal encodes it, so a row
// that was damaged or written by something else is reported as
// entry.ErrCorruptRecord naming the table and row. The version column is the
// record's entry.LeaderToken: every write stores a new random 63-bit version.
// WriteEntry creates the row with INSERT ... ON CONFLICT DO NOTHING and
// replaces it with UPDATE ... WHERE name = $1 AND version = $2; a statement
// that touched no row lost the race (entry.ErrRaceLost). Under READ COMMITTED
// (PostgreSQL's default) concurrent writers conditioned on one version queue
// on the row lock, the first commits, and the others re-check the version and
// find it changed. Under REPEATABLE READ or SERIALIZABLE as the default
// isolation level, the losers get a serialization failure instead, reported
// as entry.ErrThrottled (not applied): the engine retries and then loses the
// race properly.
//
// A release is an ordinary conditional write: rows are never deleted.
//
// # Error classes
//
// One function, errorClass, maps PostgreSQL's SQLSTATE codes: a missing table,
// schema or database, a table of another shape than the one above (a column
// missing or of another type, name not unique, another NOT NULL column
// without a default, a CHECK constraint, a view or materialized view, a
// column too narrow for our values: any data exception, class 22, or a
// version pgx cannot encode as the column's type), a
// missing privilege, failed authentication, a server certificate this host
// does not trust or that names another host (sslmode=verify-ca or
// verify-full; an expired one is retried), a server that does not take TLS
// connections when the sslmode asks for them (require, verify-ca,
// verify-full: the error names the server) or a server older than PostgreSQL
// 11 (no sha256) are refusals (entry.ErrRefused: Acquire ends, naming the
// table and row); too many connections, serialization failures, deadlocks,
// lock timeouts, a server starting up or a read-only session are throttling
// (entry.ErrThrottled: retried with backoff). Both classes are statement
// errors that abort the statement's transaction, so the write was not applied.
// Anything else, notably a connection lost while a write was in flight, is an
// unknown outcome: the engine reads the row back and looks for its write id.
// Outside errorClass, a call that gets no connection from the pool sent
// nothing, and is throttling, unless the pool is closed, which is a refusal.
//
// A read-only session (read_only_sql_transaction, 25006) is a server that is
// a standby, such as a primary demoted by a failover while connections to it
// stayed open, or one with default_transaction_read_only. The connection that
// answered so is closed, not returned to the pool, and the retry connects
// anew. Add target_session_attrs=read-write to the connection string (libpq's
// and pgx's), so that a new connection goes only to a writable server.
//
// # Push notifications
//
// Decider implements leaderelection.ChangeNotifier. Every write calls
// pg_notify in its own statement, so the notification is sent if and only if
// the write commits. The channel is derived from the table and election names
// (hashed, so it is always a valid identifier of at most 63 bytes).
// WaitForChange listens on a dedicated connection, one per Decider (so one
// per election a process takes part in or watches, not one per process),
// taken from the pool on first use and then removed from it (pgxpool's
// Hijack), so that it is not counted in the pool's MaxConns
// (pool_max_conns), and kept until Close; when it breaks, it is reconnected
// with capped, jittered exponential backoff, and meanwhile WaitForChange
// fails at once, so that candidates and watchers poll instead.
//
// A notification carries the change itself: the version replaced, the new
// version, the commit time and the record, with a MAC computed in the writing
// statement from a random secret kept in the row (created with it, never
// sent). Any role may NOTIFY any channel, and any role may LISTEN, so the
// listener takes a change from a notification only when its MAC checks out
// with the secret the listener last read and it replaces the record the
// listener knew: a forged notification fails the first test, a replayed one
// the second. Anything else (a record too large for a notification, a change
// the listener cannot place, one arriving before it has read the row) is a
// hint: the listener reads the row. Either way it hands that one record to
// every WaitForChange waiting in the process, so that a write costs no read
// in the steady state, and at most one per process however many candidates
// and watchers it has. A waiter whose token is the record last read or
// pushed, with no hint since, reads nothing; any other token costs one read
// when it starts waiting. The record travels in the clear: a role that may
// connect to the database but not read the table can still see the leader's
// ID and addresses by listening on the channel.
//
// LISTEN needs a session of its own: connect the pool directly to PostgreSQL
// or through a pooler in session mode. Behind a pooler in transaction mode,
// notifications may never arrive; the election stays safe, and candidates
// and watchers find the channel deaf at the next term's end and poll every
// PollInterval from then on.
//
// A pool whose ConnConfig has its own OnNotification handler gets the
// listener's notifications there too, as pgx hands each one to that handler
// instead of to the connection: each is then an unverified hint, which
// costs the listener a read.
//
// # Clocks
//
// The token's CommitTime is the server's clock_timestamp() taken when the
// write was applied, stored in committed_at and returned by reads too.
//
// # Safety
//
// The row serialises all writers: of any number of writes conditioned on one
// version, exactly one commits. Leadership itself rests on clocks, as for
// every backend: see the leaderelection package documentation for the
// clock assumptions, and pass the fencing token (the record's Term) to
// downstream systems to cover process pauses.
package postgres
