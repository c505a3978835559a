package inbox

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// Server errors that say "not now" rather than "not this": too many connections, lock wait
// timeout, deadlock, a user's connection or resource limit.
var transient = map[uint16]bool{1040: true, 1203: true, 1205: true, 1213: true, 1226: true}

// Rejected reports whether err is the MySQL server refusing the statement itself (data too
// long, an invalid character, a missing privilege), as opposed to the inbox being unreachable,
// too slow or busy. A rejected statement fails again when retried unchanged; for the others a
// retry may succeed.
func Rejected(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && !transient[me.Number]
}
