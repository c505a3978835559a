// Package testname names the per-test resources of the harnesses (pgtest, mysqltest,
// redistest) so that concurrent test processes never collide and a later run can tell a
// leftover's age from its name.
package testname

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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

// StaleAfter is how old a leftover must be before a later run removes it: no test runs this
// long, so it belongs to a run that died before its cleanup.
const StaleAfter = 3 * time.Hour

// Run is a harness's process-wide state, the part a test helper cannot avoid: resources are
// numbered per process, and leftovers of dead runs are swept once per server.
type Run struct {
	// Stamp is the process start, in every name so that a later run can age a leftover.
	Stamp int64
	seq   atomic.Int64
	mu    sync.Mutex
	swept map[string]bool
}

// NewRun starts a harness's state at the current time.
func NewRun() *Run { return &Run{Stamp: time.Now().Unix(), swept: map[string]bool{}} }

// Next numbers the process's next resource.
func (r *Run) Next() int64 { return r.seq.Add(1) }

// Name returns <prefix><pkg><sep><stamp><sep><pid><sep><n> for the next resource: the package
// says who left it behind, the stamp lets a later run age it, the pid keeps concurrent runs
// apart.
func (r *Run) Name(prefix, sep string) string {
	return fmt.Sprintf("%s%s%s%d%s%d%s%d", prefix, Package(), sep, r.Stamp, sep, os.Getpid(), sep, r.Next())
}

// SweepOnce calls sweep the first time it is asked for server in this process, with the stamp
// below which a leftover is stale. Other tests asking meanwhile wait for the sweep rather than
// race it.
func (r *Run) SweepOnce(server string, sweep func(cutoff int64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.swept[server] {
		return
	}
	r.swept[server] = true
	sweep(time.Now().Add(-StaleAfter).Unix())
}

// StampOf reads the run stamp from a name ending in <sep><stamp><sep><pid><sep><n>, written in
// base.
func StampOf(name, sep string, base int) (int64, bool) {
	parts := strings.Split(name, sep)
	if len(parts) < 4 {
		return 0, false
	}
	ts, err := strconv.ParseInt(parts[len(parts)-3], base, 64)
	return ts, err == nil
}
