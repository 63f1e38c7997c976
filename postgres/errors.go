package postgres

import (
	"errors"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/tlsfail"
)

// errorClass maps an error from a statement (or from connecting to run it)
// to the class the engine acts on: entry.ErrRefused, entry.ErrThrottled, or
// nil for an unknown outcome.
//
// Only server errors (SQLSTATE codes) are classed. A statement the server
// answered with an ERROR ran in its own implicit transaction, which the error
// aborted, and an error while connecting comes before any statement was
// sent: in both cases the write was not applied, which the two classes
// require. Everything else (a connection lost or a context ended while a
// statement was in flight, an administrator's shutdown, a cancelled
// statement, which may interrupt the server after it committed) is left
// unknown, and the engine reads the row back.
func errorClass(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if encodeFailed(err) || tlsfail.Why(err) != "" || tlsRefused(err) != "" {
			// Nothing was sent: the same write fails again, or no
			// connection can be made until sslrootcert, the
			// server's certificate or its configuration changes.
			return entry.ErrRefused
		}
		return nil
	}
	if strings.HasPrefix(pe.Code, "22") {
		// data_exception: a value of ours the table's column cannot
		// hold (a name longer than a varchar's limit, say): the table
		// is not one CreateTable makes, and the same write fails
		// again.
		return entry.ErrRefused
	}
	switch pe.Code {
	case "42501", // insufficient_privilege: GRANT SELECT, INSERT, UPDATE is missing
		"42P01", // undefined_table: the table does not exist
		"42703", // undefined_column: the table is not one CreateTable makes
		"42804", // datatype_mismatch: likewise
		"42P10", // invalid_column_reference: ON CONFLICT (name) with name not unique
		"23502", // not_null_violation: a NOT NULL column without a default that we do not write
		"23514", // check_violation: a CHECK constraint, or no partition for the row
		"42809", // wrong_object_type: a materialized view, a composite type
		"55000", // object_not_in_prerequisite_state: a view that cannot be written
		"42883", // undefined_function: no sha256, a server before PostgreSQL 11
		"3F000", // invalid_schema_name: the table's schema does not exist
		"3D000", // invalid_catalog_name: the database does not exist
		"28000", // invalid_authorization_specification: no pg_hba.conf entry, unknown role
		"28P01": // invalid_password
		return entry.ErrRefused
	case "53000", // insufficient_resources
		"53100", // disk_full
		"53200", // out_of_memory
		"53300", // too_many_connections (the server's, the role's or the database's limit)
		"53400", // configuration_limit_exceeded
		"40001", // serialization_failure: the transaction was rolled back
		"40P01", // deadlock_detected: likewise
		"55P03", // lock_not_available: lock_timeout ran out before the statement did anything
		"57P03", // cannot_connect_now: the server is starting up or shutting down
		"25006": // read_only_sql_transaction: a standby, as during a failover; it heals
		return entry.ErrThrottled
	}
	return nil
}

// encodeFailed reports pgx's refusal to encode a value of ours as the type
// the server gave the statement's parameter (a version column of integer,
// which cannot hold our 63-bit versions): nothing was sent, and the same
// write fails again. pgx has no type for it, only this message (which its
// own tests check).
func encodeFailed(err error) bool {
	return strings.Contains(err.Error(), "failed to encode args[")
}

// tlsRefusedText is pgconn's error when the server answers the SSLRequest
// with 'N' (ssl off, or a pooler without TLS), under sslmode require,
// verify-ca or verify-full: an errors.New of its own, with no type.
const tlsRefusedText = "server refused TLS connection"

// tlsRefused names the server (host:port) when err is pgconn failing to
// connect because it refused TLS, and every address tried did (with several
// hosts, or sslmode=prefer's fallback without TLS, another failure may
// pass): no statement was sent, and none will be until the server's
// configuration or the sslmode changes. It is "" otherwise.
func tlsRefused(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return ""
	}
	leaves := leafErrors(errors.Unwrap(ce), nil)
	if len(leaves) == 0 {
		return ""
	}
	for _, l := range leaves {
		if l.Error() != tlsRefusedText {
			return ""
		}
	}
	return net.JoinHostPort(ce.Config.Host, strconv.Itoa(int(ce.Config.Port)))
}

// leafErrors appends to leaves the errors in err's tree that wrap no other.
func leafErrors(err error, leaves []error) []error {
	switch u := err.(type) {
	case nil:
		return leaves
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			leaves = leafErrors(e, leaves)
		}
		return leaves
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			return leafErrors(next, leaves)
		}
	}
	return append(leaves, err)
}

// fix says what a refusal needs from whoever set the election up, where the
// server's message names the problem but not the remedy.
func fix(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if encodeFailed(err) {
			return shapeFix
		}
		if why := tlsfail.Why(err); why != "" {
			return " (" + why + ")"
		}
		if server := tlsRefused(err); server != "" {
			return " (the server at " + server + " does not take TLS connections, which the sslmode asks for:" +
				" turn ssl on in its configuration, or change sslmode)"
		}
		return ""
	}
	if strings.HasPrefix(pe.Code, "22") {
		return shapeFix
	}
	switch pe.Code {
	case "42P01", "3F000":
		return " (create the table with CreateTable, or the CREATE TABLE in the package documentation)"
	case "42501":
		return " (the role needs SELECT, INSERT and UPDATE on the table)"
	case "42703", "42804", "42P10", "23502", "23514", "42809", "55000":
		return shapeFix
	}
	return ""
}

const shapeFix = " (the table is not as CreateTable, or the CREATE TABLE in the package documentation, makes it:" +
	" a plain table with name text PRIMARY KEY, version bigint, record bytea, committed_at timestamptz" +
	" and secret bytea, any other column nullable or with a default, and no CHECK constraint)"
