// Package testname names the per-test resources of the harnesses (pgtest, mysqltest,
// redistest) so that concurrent test processes never collide and a later run can tell a
// leftover's age from its name.
package testname

import (
	"os"
	"path/filepath"
	"strings"
)

// Package is the test binary's name ("pump" for pump.test), reduced to [a-z0-9_] and at most
// 20 characters, so that a full database name stays within PostgreSQL's 63 and MySQL's 64
// characters.
func Package() string {
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe"), ".test")
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 20 {
			break
		}
	}
	if b.Len() == 0 {
		return "pkg"
	}
	return b.String()
}
