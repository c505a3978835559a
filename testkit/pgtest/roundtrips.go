package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// RoundTrips is a pgx tracer that counts what a connection sends: round trips (a query, a
// batch, a COPY or a prepare each wait for one answer) and statements (a batch counts each of
// its queries). It makes the cost of a code path measurable independently of the machine's
// speed: benches report it per message. Set it as pgx.ConnConfig.Tracer.
type RoundTrips struct {
	trips, statements atomic.Int64
	mu                sync.Mutex
	byText            map[string]int64
	// waited is the time from each round trip's start to its end, by the round trip's first
	// statement: where a sequential caller waits on the server.
	waited map[string]wait
	// shorts caches short by the statement's text: the tracer runs on the measured
	// connection's path, and a bench's statements are a few texts repeated.
	shorts map[string]string
}

type wait struct {
	total time.Duration
	count int64
}

// NewRoundTrips returns an empty counter.
func NewRoundTrips() *RoundTrips {
	return &RoundTrips{byText: map[string]int64{}, waited: map[string]wait{}, shorts: map[string]string{}}
}

// Counts returns the round trips and statements counted so far.
func (r *RoundTrips) Counts() (trips, statements int64) { return r.trips.Load(), r.statements.Load() }

// Reset zeroes the counters.
func (r *RoundTrips) Reset() {
	r.trips.Store(0)
	r.statements.Store(0)
	r.mu.Lock()
	clear(r.byText)
	clear(r.waited)
	r.mu.Unlock()
}

// Top lists the n most frequent statements (their first words) with their counts, most
// frequent first.
func (r *RoundTrips) Top(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.byText))
	for k := range r.byText {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(r.byText[b] - r.byText[a]) })
	out := make([]string, 0, n)
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%7d  %s", r.byText[k], k))
	}
	return out
}

// Waited lists the n round trips the connection waited on longest in total, by their first
// statement, with their count and mean wait, longest first.
func (r *RoundTrips) Waited(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type row struct {
		key   string
		total time.Duration
		count int64
	}
	var rows []row
	for k, w := range r.waited {
		rows = append(rows, row{k, w.total, w.count})
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.total - a.total) })
	out := make([]string, 0, n)
	for _, w := range rows[:min(n, len(rows))] {
		out = append(out, fmt.Sprintf("%10s = %7d × %8s  %s", w.total.Round(time.Millisecond), w.count,
			(w.total/time.Duration(max(w.count, 1))).Round(time.Microsecond), w.key))
	}
	return out
}

func short(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 90 {
		sql = sql[:90]
	}
	return sql
}

// key is short(sql), computed once per text; r.mu is held.
func (r *RoundTrips) key(sql string) string {
	k, ok := r.shorts[sql]
	if !ok {
		k = short(sql)
		r.shorts[sql] = k
	}
	return k
}

// statement counts one statement and returns its key.
func (r *RoundTrips) statement(sql string) string {
	r.statements.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.key(sql)
	r.byText[k]++
	return k
}

// trip is the round trip in flight: the key its wait is charged to and when it began.
type trip struct {
	key   string
	began time.Time
}

type tripKey struct{}

func (r *RoundTrips) start(ctx context.Context, key string) context.Context {
	r.trips.Add(1)
	return context.WithValue(ctx, tripKey{}, &trip{key: key, began: time.Now()})
}

func (r *RoundTrips) end(ctx context.Context) {
	t, ok := ctx.Value(tripKey{}).(*trip)
	if !ok {
		return
	}
	r.mu.Lock()
	w := r.waited[t.key]
	r.waited[t.key] = wait{w.total + time.Since(t.began), w.count + 1}
	r.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return r.start(ctx, r.statement(d.SQL))
}

// TraceQueryEnd implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	r.end(ctx)
}

// TraceBatchStart implements pgx.BatchTracer. The batch's wait is charged to its first
// statement, marked "batch:".
func (r *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	key := "batch"
	if d.Batch != nil && len(d.Batch.QueuedQueries) > 0 {
		r.mu.Lock()
		key = "batch: " + r.key(d.Batch.QueuedQueries[0].SQL)
		r.mu.Unlock()
	}
	return r.start(ctx, key)
}

// TraceBatchQuery implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.statement(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	r.end(ctx)
}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (r *RoundTrips) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	return r.start(ctx, r.statement("COPY "+d.TableName.Sanitize()))
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (r *RoundTrips) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	r.end(ctx)
}

// TracePrepareStart implements pgx.PrepareTracer.
func (r *RoundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return r.start(ctx, "prepare")
}

// TracePrepareEnd implements pgx.PrepareTracer.
func (r *RoundTrips) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareEndData) {
	r.end(ctx)
}

// BackendCPU is the CPU time the server process pid (a connection's backend, PgConn().PID or
// Session.PID) has used so far (user and system), read from /proc: the server's cost of what
// the connection sent, which a client's wall clock mixes with the round trips. It reports
// false when the server is not local (or not Linux).
func BackendCPU(pid uint32) (time.Duration, bool) {
	s, ok := procStat(int(pid))
	if !ok {
		return 0, false
	}
	// USER_HZ is 100 on every Linux the project runs on.
	return time.Duration(s.ticks) * 10 * time.Millisecond, true
}

// ServerCPU is the CPU time the whole local server has used so far: every process the
// postmaster behind conn started (backends, autovacuum, the writers), live ones from their
// /proc/<pid>/stat and exited ones from the postmaster's own count of its reaped children. A
// bench that runs several services takes it before and after: their backends come and go with
// the pools, and the cost a growing table adds (autovacuum, index upkeep) is the server's too.
// Other databases' work on the same server counts as well, so it is a quiet machine's figure.
// It reports false when the server is not local (or not Linux).
func ServerCPU(conn *pgx.Conn) (time.Duration, bool) {
	self, ok := procStat(int(conn.PgConn().PID()))
	if !ok {
		return 0, false
	}
	master, ok := procStat(self.ppid)
	if !ok {
		return 0, false
	}
	total := master.childTicks
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := procStat(pid); ok && s.ppid == self.ppid {
			total += s.ticks
		}
	}
	// USER_HZ is 100 on every Linux the project runs on.
	return time.Duration(total) * 10 * time.Millisecond, true
}

// stat is what ServerCPU reads of /proc/<pid>/stat: the parent, the process's own CPU ticks
// (user and system) and those of its reaped children.
type stat struct {
	ppid              int
	ticks, childTicks int64
}

func procStat(pid int) (stat, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// The fields after the command name, which is in parentheses and may hold spaces: state,
	// ppid, ..., utime (12th), stime, cutime, cstime.
	i := bytes.LastIndexByte(raw, ')')
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 15 {
		return stat{}, false
	}
	var n [5]int64
	for k, idx := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[idx], 10, 64)
		if err != nil {
			return stat{}, false
		}
		n[k] = v
	}
	return stat{ppid: int(n[0]), ticks: n[1] + n[2], childTicks: n[3] + n[4]}, true
}
