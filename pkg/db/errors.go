package db

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/msgexchange/msgexchange/pkg/outage"
)

// The SQLSTATEs production decides on; every check it makes of a PostgreSQL error code is here.
const (
	uniqueViolation     = "23505"
	lockNotAvailable    = "55P03" // lock_timeout, NOWAIT
	queryCanceled       = "57014" // statement_timeout, pg_cancel_backend
	readOnlyTransaction = "25006" // a standby after a failover
	tooManyConnections  = "53300"
	serializationFail   = "40001"
	deadlockDetected    = "40P01"
	// expectFailed is what msgx_expect raises (migration 00017): a check made on the server so
	// that a failed one stops the COMMIT sent behind it in the same pipeline.
	expectFailed = "MX001"
)

func code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// IsUniqueViolation reports a unique or primary-key conflict.
func IsUniqueViolation(err error) bool { return code(err) == uniqueViolation }

// IsExpectFailed reports a msgx_expect check that failed.
func IsExpectFailed(err error) bool { return code(err) == expectFailed }

// IsLockTimeout reports a lock wait that gave up (lock_timeout or NOWAIT).
func IsLockTimeout(err error) bool { return code(err) == lockNotAvailable }

// IsStatementTimeout reports a statement cancelled by statement_timeout (or by an operator's
// pg_cancel_backend, which the server reports the same way).
func IsStatementTimeout(err error) bool { return code(err) == queryCanceled }

// IsConnectionError reports that the server could not be reached or the connection broke:
// connect failures, closed or reset connections, the server shutting down, refusing new
// sessions or being a read-only standby. A statement the server refused for its content is not.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	switch c := code(err); {
	case c == "":
	case c[:2] == "08", c[:2] == "28", c[:3] == "57P", c == tooManyConnections, c == readOnlyTransaction:
		// 08: connection exception; 28: the role or its password refused; 57P01–57P05: admin or
		// crash shutdown, cannot connect now, idle session timeout.
		return true
	default:
		return false
	}
	v, ok := outage.Transport(err)
	return ok && v == outage.Down
}

// Classify tells a PostgreSQL outage from a failure of the statement itself.
func Classify(err error) outage.Verdict {
	switch c := code(err); {
	case IsConnectionError(err):
		return outage.Down
	case c == queryCanceled, c == lockNotAvailable, c == serializationFail, c == deadlockDetected:
		// Transient, but a statement too large for its bound times out the same way.
		return outage.Unsure
	case c != "":
		return outage.Attempt
	}
	if v, ok := outage.Transport(err); ok {
		return v
	}
	return outage.Attempt
}
