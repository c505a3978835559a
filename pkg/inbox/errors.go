package inbox

import (
	"errors"

	"github.com/go-sql-driver/mysql"
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
