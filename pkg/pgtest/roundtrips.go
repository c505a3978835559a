package pgtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

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
}

// NewRoundTrips returns an empty counter.
func NewRoundTrips() *RoundTrips { return &RoundTrips{byText: map[string]int64{}} }

// Counts returns the round trips and statements counted so far.
func (r *RoundTrips) Counts() (trips, statements int64) { return r.trips.Load(), r.statements.Load() }

// Reset zeroes the counters.
func (r *RoundTrips) Reset() {
	r.trips.Store(0)
	r.statements.Store(0)
	r.mu.Lock()
	clear(r.byText)
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

func (r *RoundTrips) statement(sql string) {
	r.statements.Add(1)
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 90 {
		sql = sql[:90]
	}
	r.mu.Lock()
	r.byText[sql]++
	r.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.trips.Add(1)
	r.statement(d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.trips.Add(1)
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.statement(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (r *RoundTrips) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	r.trips.Add(1)
	r.statement("COPY " + d.TableName.Sanitize())
	return ctx
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (r *RoundTrips) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// TracePrepareStart implements pgx.PrepareTracer.
func (r *RoundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	r.trips.Add(1)
	return ctx
}

// TracePrepareEnd implements pgx.PrepareTracer.
func (r *RoundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
