package aodb

import (
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/msgexchange/msgexchange/pkg/outage"
)

// Server errors that mean "not this statement": it fails again when retried unchanged. Every
// other error (a failover's read-only server, a shutdown, a killed connection, a timeout,
// a lock wait, a deadlock) may pass on a retry, so a client is told to retry: a wrong "do not
// retry" loses a message, a wrong "retry" only costs a duplicate the identity check absorbs.
var rejected = map[uint16]bool{
	1048: true, // column cannot be null
	1142: true, // command denied (missing privilege)
	1143: true, // column access denied
	1366: true, // incorrect string value (characters the column cannot hold)
	1406: true, // data too long for the column
}

// Rejected reports whether err is the MySQL server refusing the statement itself (data too
// long, an invalid character, a missing privilege), as opposed to the inbox being unreachable,
// too slow, busy or failing over.
func Rejected(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && rejected[me.Number]
}

// Server errors that mean the inbox is not serving (shutdown, a read-only server after a
// failover, no connection slot) or that the connection was killed: an outage of the inbox.
var down = map[uint16]bool{
	1040: true, // too many connections
	1053: true, // server shutdown in progress
	1290: true, // running with --read-only
	1836: true, // read-only mode
	1927: true, // connection was killed (MariaDB)
	1044: true, // access denied to the database (a grant revoked, an account changed)
	1045: true, // access denied for the user (its password changed, the account locked)
}

// Server errors about waiting, not about the statement: a lock held by someone else or a
// time bound. A huge statement can hit a bound too, so a probe decides.
var waiting = map[uint16]bool{
	1205: true, // lock wait timeout
	1213: true, // deadlock
	1317: true, // query execution was interrupted
	1969: true, // statement timeout (MariaDB max_statement_time)
	3024: true, // max_execution_time exceeded (MySQL)
}

// Classify tells an outage of the inbox from a failure of the statement itself.
func Classify(err error) outage.Verdict {
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && down[me.Number]:
		return outage.Down
	case errors.As(err, &me) && waiting[me.Number]:
		return outage.Unsure
	case errors.As(err, &me):
		return outage.Attempt
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone):
		return outage.Down
	}
	if v, ok := outage.Transport(err); ok {
		return v
	}
	return outage.Attempt
}

// TooLarge reports whether err is a statement refused for its size: larger than the server's
// max_allowed_packet (client- or server-side) or than the column. Retrying it can never
// succeed.
func TooLarge(err error) bool {
	var me *mysql.MySQLError
	return errors.Is(err, mysql.ErrPktTooLarge) || (errors.As(err, &me) && (me.Number == 1153 || me.Number == 1301 || me.Number == 1406))
}
