package benchdata_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/testkit/benchdata"
)

// growing are the tables whose size follows the traffic or the flight count: a statement may
// not read one of them whole.
var growing = map[string]bool{
	"proc_state": true, "proc_raw": true, "proc_attempt": true, "msg_event": true, "flight_schd": true,
	"flight_gtdt": true, "flight_ckdt": true, "flight_cldt": true, "flight_chdt": true, "flight_psdt": true,
	"flight_chot": true, "flight_dely": true, "flight_abtm": true, "flight_route_point": true,
	"flight_raw_content": true, "flight_history": true, "flight_change": true, "flight_version_floor": true,
	"req_track": true, "inbox_late": true, "inbox_hole": true,
}

// call is one real code path; every statement it sends is EXPLAINed. The parameters are what
// the services pass in steady state, on data where msg and flid exist.
type call struct {
	name string
	run  func(ctx context.Context, q db.Executor, tx pgx.Tx, now time.Time) error
}

// scanAllowed lists the calls that read a large part of a growing table on purpose, with the
// reason; their plans are not checked.
var scanAllowed = map[string]string{
	"flightstore.LoadDays": "the schedule snapshot loads every flight of its days: its cost is the days' flights, " +
		"a fifth of flight_schd here, where a hash join over the children is the cheaper plan",
}

// minRows is the size below which a Seq Scan is the planner's right choice whatever the indexes;
// every table that grows with the traffic or the flights is above it at the test scale.
const minRows = 10_000

const (
	msg  = int64(12_345) // a finished message in the middle of the window
	flid = "F1234"       // a live flight
	gone = "F4000"       // a flight in flight_history at scale Test
)

var calls = []call{
	{"queue.Head", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, _, err := queue.Head(ctx, q)
		return err
	}},
	{"queue.Get", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := queue.Get(ctx, q, msg)
		return err
	}},
	{"queue.Attempts", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := queue.Attempts(ctx, q, msg)
		return err
	}},
	{"queue.StoredRaw", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := queue.StoredRaw(ctx, q, msg)
		return err
	}},
	{"queue.Exhaust", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := queue.Exhaust(ctx, q, msg, 5, now)
		return err
	}},
	{"queue.BackfillDue", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := queue.BackfillDue(ctx, q, now, time.Hour, 100)
		return err
	}},
	{"queue.LockManyForBackfill", func(ctx context.Context, _ db.Executor, tx pgx.Tx, _ time.Time) error {
		_, err := queue.LockManyForBackfill(ctx, tx, []int64{msg, msg + 1})
		return err
	}},
	{"queue.Backfilled", func(ctx context.Context, _ db.Executor, tx pgx.Tx, now time.Time) error {
		return queue.Backfilled(ctx, tx, now, msg, msg+1)
	}},
	{"queue.ReadBackfillHealth", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := queue.ReadBackfillHealth(ctx, q, 5)
		return err
	}},
	{"queue.ReadBacklog", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := queue.ReadBacklog(ctx, q, now)
		return err
	}},
	{"queue.Stats", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := queue.Stats(ctx, q, now)
		return err
	}},
	{"queue.DeleteFinished", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := queue.DeleteFinished(ctx, q, now.Add(-24*time.Hour), 500)
		return err
	}},
	// A sweep that keeps up: at the generated window's edge fewer rows have expired than a batch
	// holds, as at the end of every round in steady state, so a walk that filters instead of
	// stopping at the cutoff would read the whole table.
	{"queue.DeleteFinished at the retention limit", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := queue.DeleteFinished(ctx, q, now.Add(-7*24*time.Hour), 500)
		return err
	}},
	{"outbox.Pending msg", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := outbox.Pending(ctx, q, "KAFKA:msg", 100, now)
		return err
	}},
	{"outbox.Pending schd", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := outbox.Pending(ctx, q, "KAFKA:schd", 100, now)
		return err
	}},
	{"outbox.ByMessage", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := outbox.ByMessage(ctx, q, msg)
		return err
	}},
	{"outbox.ByKey", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := outbox.ByKey(ctx, q, flid, 50, 1<<17)
		return err
	}},
	{"outbox.DeleteSent", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := outbox.DeleteSent(ctx, q, now.Add(-6*24*time.Hour), 500)
		return err
	}},
	{"flightstore.Load", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := flightstore.Load(ctx, q, flid, false)
		return err
	}},
	{"flightstore.LoadLocked", func(ctx context.Context, _ db.Executor, tx pgx.Tx, _ time.Time) error {
		_, _, err := flightstore.LoadLocked(ctx, tx, nil, flid)
		return err
	}},
	{"flightstore.Children", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := flightstore.Children(ctx, q, flid)
		return err
	}},
	{"flightstore.LoadMany", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := flightstore.LoadMany(ctx, q, nil, []string{flid, "F1235", "F1236"})
		return err
	}},
	{"flightstore.LoadDays", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := flightstore.LoadDays(ctx, q, nil, []time.Time{now.Add(72 * time.Hour)})
		return err
	}},
	{"flightstore.ArchivedOf", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := flightstore.ArchivedOf(ctx, q, gone)
		return err
	}},
	{"flightstore.EachHistory", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		return flightstore.EachHistory(ctx, q, flid, 0, 50, flightstore.RowBound{Bytes: 1 << 20, RowBytes: 1 << 18}, func(flightstore.Change) error { return nil })
	}},
	{"flightstore.EachChangeOf", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		return flightstore.EachChangeOf(ctx, q, msg, 50, flightstore.RowBound{Bytes: 1 << 20, RowBytes: 1 << 18}, func(flightstore.Change) error { return nil })
	}},
	{"flightstore.HistoryCandidates", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := flightstore.HistoryCandidates(ctx, q, flightstore.HistoryPolicy{
			Retention: 72 * time.Hour, QuietPeriod: 6 * time.Hour, Zone: time.UTC}, now, 100)
		return err
	}},
	{"flightstore.DeleteSnapLog", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := flightstore.DeleteSnapLog(ctx, q, now.Add(-89*24*time.Hour), 500)
		return err
	}},
	{"flightstore.FLIDsByNumber", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := flightstore.FLIDsByNumber(ctx, q, "1234", now)
		return err
	}},
	{"request.PendingForSend", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := request.PendingForSend(ctx, q, 10)
		return err
	}},
	{"request.Expire", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := request.Expire(ctx, q, now, 10*time.Minute)
		return err
	}},
	{"request.AnsweredBy", func(ctx context.Context, q db.Executor, _ pgx.Tx, _ time.Time) error {
		_, err := request.AnsweredBy(ctx, q, msg)
		return err
	}},
	{"request.DeleteClosed", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := request.DeleteClosed(ctx, q, now.Add(-29*24*time.Hour), 500)
		return err
	}},
	{"cursor.WatchedHoles", func(ctx context.Context, q db.Executor, _ pgx.Tx, now time.Time) error {
		_, err := cursor.WatchedHoles(ctx, q, now.Add(-24*time.Hour))
		return err
	}},
}

// recorder is a pgx tracer that keeps every statement a connection sends, with its arguments.
type recorder struct {
	mu    sync.Mutex
	stmts []stmt
}

type stmt struct {
	sql  string
	args []any
}

func (r *recorder) add(sql string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stmts = append(r.stmts, stmt{sql, args})
}

func (r *recorder) take() []stmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stmts
	r.stmts = nil
	return s
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL, d.Args)
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		r.add(q.SQL, q.Arguments)
	}
	return ctx
}

func (r *recorder) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// tracedPool is a one-connection pool on dsn whose statements rec records, closed with the test.
func tracedPool(t *testing.T, dsn string) (*recorder, *pgxpool.Pool) {
	t.Helper()
	rec := &recorder{}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = rec
	cfg.MaxConns = 1
	traced, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traced.Close)
	return rec, traced
}

// TestNoFullScanOfGrowingTables runs each call on production-shaped data with the planner's
// statistics, EXPLAINs every statement it sent and refuses a Seq Scan of a growing table or a
// Sort of more than a tenth of one.
func TestNoFullScanOfGrowingTables(t *testing.T) {
	d := benchdata.New(t, benchdata.Test)
	ctx := t.Context()
	rec, traced := tracedPool(t, d.DSN)
	rows := tableRows(t, d.Pool)
	now := time.Now()
	used := map[string]bool{}
	for _, c := range calls {
		if _, ok := scanAllowed[c.name]; ok {
			used[c.name] = true
		}
		tx, err := traced.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec.take()
		runErr := c.run(ctx, tx, tx, now)
		stmts := rec.take()
		_ = tx.Rollback(ctx)
		if runErr != nil {
			t.Errorf("%s: %v", c.name, runErr)
			continue
		}
		if len(stmts) == 0 {
			t.Errorf("%s sent no statement", c.name)
		}
		for _, s := range stmts {
			if used[c.name] {
				continue
			}
			var raw []byte
			if err := d.Pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+s.sql, s.args...).Scan(&raw); err != nil {
				t.Errorf("%s: explain %q: %v", c.name, short(s.sql), err)
				continue
			}
			var plans []struct{ Plan node }
			if err := json.Unmarshal(raw, &plans); err != nil {
				t.Fatal(err)
			}
			for _, p := range problems(plans[0].Plan, rows) {
				t.Errorf("%s: %s in %s", c.name, p, short(s.sql))
			}
		}
	}
	for name := range scanAllowed {
		if !used[name] {
			t.Errorf("scanAllowed names %q, which is not a call: remove it", name)
		}
	}
}

type node struct {
	Type     string  `json:"Node Type"`
	Relation string  `json:"Relation Name"`
	Rows     float64 `json:"Plan Rows"`
	Plans    []node  `json:"Plans"`
}

// problems walks a plan: a Seq Scan of a growing table, or a Sort whose input is more than a
// tenth of the largest growing table beneath it, costs in proportion to the data.
func problems(n node, rows map[string]float64) []string {
	var out []string
	if n.Type == "Seq Scan" && growing[n.Relation] && rows[n.Relation] >= minRows {
		out = append(out, fmt.Sprintf("Seq Scan on %s (%.0f rows)", n.Relation, rows[n.Relation]))
	}
	if n.Type == "Sort" || n.Type == "Incremental Sort" {
		var in float64
		for _, c := range n.Plans {
			in = max(in, c.Rows)
		}
		if big := largest(n, rows); big > 0 && in > big/10 {
			out = append(out, fmt.Sprintf("Sort of %.0f rows over a table of %.0f", in, big))
		}
	}
	for _, c := range n.Plans {
		out = append(out, problems(c, rows)...)
	}
	return out
}

func largest(n node, rows map[string]float64) float64 {
	var m float64
	if growing[n.Relation] && rows[n.Relation] >= minRows {
		m = rows[n.Relation]
	}
	for _, c := range n.Plans {
		m = max(m, largest(c, rows))
	}
	return m
}

func tableRows(t *testing.T, p *pgxpool.Pool) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	r, err := p.Query(t.Context(), `SELECT relname, reltuples FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var name string
		var n float32
		if err := r.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = float64(n)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
