package maintenance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/kafkarecord"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/testkit/contracttest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
	"github.com/msgexchange/msgexchange/testkit/testclock"
)

// 20:00 on 10 March in Shanghai.
var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

type bundle struct {
	pg    *pgtest.DB
	redis *redistest.Redis
	sess  *pgtest.Session
	clk   *testclock.Clock
}

func setup(t *testing.T, forget func(b *bundle) Forgetter) (*Cleaner, *bundle) {
	t.Helper()
	b := &bundle{pg: pgtest.New(t), redis: redistest.New(t), clk: testclock.New(now)}
	b.sess = b.pg.Session(t)
	zone, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	var f Forgetter = NewRedisForgetter(b.redis.Client, b.redis.Prefix, 2*time.Second)
	if forget != nil {
		f = forget(b)
	}
	cfg := FromConfig(config.Default())
	cfg.Batch = 2 // several batches per sweep
	cfg.Statement = 500 * time.Millisecond
	cfg.Pause = 0
	cfg.ProcRetention = 24 * time.Hour
	cfg.EventRetention = 7 * 24 * time.Hour
	cfg.SnapLogRetention = 90 * 24 * time.Hour
	cfg.ReqRetention = 30 * 24 * time.Hour
	cfg.JobRetention = 30 * 24 * time.Hour
	cfg.History = flightstore.HistoryPolicy{Retention: 3 * 24 * time.Hour, QuietPeriod: 2 * 24 * time.Hour, Zone: zone}
	c := New(cfg, f, b.clk, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	return c, b
}

func (b *bundle) list(t *testing.T, sql string) string {
	t.Helper()
	rows, err := b.pg.Pool.Query(t.Context(), sql)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, " ")
}

// flightRow adds a flight and its projection, as the pump would have left them.
func (b *bundle) flightRow(t *testing.T, flid, day, state, actt string, updated time.Time) {
	t.Helper()
	var deleted *time.Time
	if state == "DELETED" {
		deleted = &updated
	}
	b.pg.Exec(t, `INSERT INTO flight_schd (flid, state, state_version, operation_day, created_at, updated_at, deleted_at, actt)
		VALUES ($1, $2, 5, $3::date, $4, $4, $5, nullif($6, ''))`, flid, state, day, updated, deleted, actt)
	ctx := t.Context()
	if state != "DELETED" {
		b.redis.Client.Set(ctx, projection.FlightKey(b.redis.Prefix, flid), `{"FLID":"`+flid+`"}`, 0)
	}
	b.redis.Client.HSet(ctx, projection.VersionKey(b.redis.Prefix), flid, 5)
}

func TestRunOnceDeletesExactlyTheEligibleRows(t *testing.T) {
	c, b := setup(t, nil)
	day := 24 * time.Hour
	// proc_state: 1-3 done and old, 4 recent, 5 owed, 6 abandoned.
	for i, r := range []struct {
		marked, abandoned bool
		age               time.Duration
	}{{true, false, 2 * day}, {true, false, 2 * day}, {true, false, 2 * day}, {true, false, time.Hour}, {false, false, 2 * day}, {false, true, 2 * day}} {
		at := now.Add(-r.age)
		var backfillAt, abandonedAt, next *time.Time
		var reason *string
		switch {
		case r.marked:
			backfillAt = &at
		case r.abandoned:
			mr := "MISSING_ROW"
			abandonedAt, reason = &at, &mr
		default:
			next = &at
		}
		b.pg.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, finished_at, backfill_next_at, backfill_at,
			backfill_abandoned_at, backfill_abandon_reason, updated_at) VALUES ($1, 'SUCCEEDED', $2, $2, $3, $4, $5, $6, $2)`,
			i+1, at, next, backfillAt, abandonedAt, reason)
	}
	// msg_event: 1-3 sent long ago, 4 sent recently, 5 DEAD, 6 PENDING.
	for i, st := range []string{"SENT", "SENT", "SENT", "SENT", "DEAD", "PENDING"} {
		at := now.Add(-8 * day)
		if i == 3 {
			at = now.Add(-day)
		}
		var sent *time.Time
		if st == "SENT" {
			sent = &at
		}
		b.pg.Exec(t, `INSERT INTO msg_event (event_id, target, partition_key, event_type, state_version, state, created_at, updated_at, sent_at)
			VALUES ($1, 'KAFKA:msg', 'X', 'UPSERT', 1, $2, $3, $3, $4)`, i+1, st, at, sent)
	}
	b.pg.Exec(t, `SELECT setval('msg_event_id_seq', 100)`) // new events come after the ones above
	// schd_snap_log: 1-3 old, 4 recent.
	for i := range 4 {
		at := now.Add(-91 * day)
		if i == 3 {
			at = now.Add(-day)
		}
		b.pg.Exec(t, `INSERT INTO schd_snap_log (id, msg_id, styp, outcome, scope_end, recv_at) VALUES ($1, 1, 'DNLD', 'APPLIED', $2::date, $2)`, i+1, at)
	}
	// req_track: 1-3 closed long ago, 4 closed recently, 5 open (old).
	for i, st := range []string{"DONE", "EXPIRED", "DONE", "DONE", "SENT"} {
		at := now.Add(-31 * day)
		if i == 3 {
			at = now.Add(-day)
		}
		b.pg.Exec(t, `INSERT INTO req_track (req_id, req_type, req_styp, scope, sndr, state, coutmsgs_id, created_at, sent_at, done_at, expired_at, updated_at)
			VALUES ($1, 'RQRD', 'GLST', $2, 'OMMS', $3, $1, $4, $4, CASE WHEN $3 = 'DONE' THEN $4::timestamptz END,
				CASE WHEN $3 = 'EXPIRED' THEN $4::timestamptz END, $4)`, i+1, fmt.Sprint("S", i), st, at)
	}
	// schd_republish and projection_rebuild: 1-3 ended long ago, 4 ended recently, 5 open (old).
	// A rebuild also needs its dry_run.
	for table, extra := range map[string][2]string{"schd_republish": {}, "projection_rebuild": {", dry_run", ", false"}} {
		for i, st := range []string{"DONE", "CANCELLED", "DONE", "DONE", "RUNNING"} {
			at := now.Add(-31 * day)
			if i == 3 {
				at = now.Add(-day)
			}
			var finished *time.Time
			if st != "RUNNING" {
				finished = &at
			}
			b.pg.Exec(t, `INSERT INTO `+table+` (state, requested_by, requested_at, finished_at, updated_at`+extra[0]+`)
				VALUES ($1, 'op', $2, $3, $2`+extra[1]+`)`, st, at.Add(-time.Hour), finished)
		}
	}
	// flights: PAST_A (actual time), PAST_D (deleted: its FDEL already sent the tombstone), BUSY.
	b.flightRow(t, "PAST_A", "2026-03-05", "ACTIVE", "05MAR260910", now.Add(-time.Hour))
	b.flightRow(t, "PAST_D", "2026-03-05", "DELETED", "", now.Add(-time.Hour))
	b.flightRow(t, "BUSY", "2026-03-05", "ACTIVE", "", now.Add(-time.Hour))

	c.RunOnce(t.Context(), b.sess)

	for _, check := range []struct{ name, sql, want string }{
		{"proc_state", `SELECT msg_id::text FROM proc_state ORDER BY msg_id`, "4 5 6"},
		{"msg_event", `SELECT event_id::text FROM msg_event WHERE event_id <= 6 ORDER BY event_id`, "4 5 6"},
		{"schd_snap_log", `SELECT id::text FROM schd_snap_log ORDER BY id`, "4"},
		{"req_track", `SELECT req_id::text FROM req_track ORDER BY req_id`, "4 5"},
		{"schd_republish", `SELECT republish_id::text FROM schd_republish ORDER BY republish_id`, "4 5"},
		{"projection_rebuild", `SELECT rebuild_id::text FROM projection_rebuild ORDER BY rebuild_id`, "4 5"},
		{"flight_schd", `SELECT flid FROM flight_schd ORDER BY flid`, "BUSY"},
		{"flight_history", `SELECT flid FROM flight_history ORDER BY flid`, "PAST_A PAST_D"},
		{"tombstones", `SELECT target || ':' || partition_key || ':' || event_type || ':' || state_version || ':' || coalesce(payload->>'STYP', 'null')
			FROM msg_event WHERE event_id > 6 ORDER BY target`, "KAFKA:msg:PAST_A:TOMBSTONE:6:HISTORY KAFKA:schd:PAST_A:TOMBSTONE:6:null"},
	} {
		if got := b.list(t, check.sql); got != check.want {
			t.Errorf("%s: got %q, want %q", check.name, got, check.want)
		}
	}
	// The tombstones, as the dispatcher reads and sends them, are records the event contract
	// describes (the KAFKA:msg note of STYP HISTORY, the KAFKA:schd null value).
	for _, target := range []string{outbox.TargetMsg, outbox.TargetSchd} {
		events, err := outbox.Pending(t.Context(), b.pg.Pool, target, 10, now.Add(time.Hour))
		if err != nil || len(events) != 1 {
			t.Fatalf("pending %s events: %d, %v", target, len(events), err)
		}
		e := events[0]
		var headers []kgo.RecordHeader
		for _, h := range kafkarecord.Headers(e.ID, e.Type, e.Version, "", "") {
			headers = append(headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		c, err := contracttest.Current()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Check(target, []byte(e.PartitionKey), headers, e.Payload); err != nil {
			t.Errorf("history tombstone: %v", err)
		}
	}
	ctx := t.Context()
	for flid, want := range map[string]int64{"PAST_A": 0, "PAST_D": 0, "BUSY": 1} {
		n, _ := b.redis.Client.Exists(ctx, projection.FlightKey(b.redis.Prefix, flid)).Result()
		v, _ := b.redis.Client.HExists(ctx, projection.VersionKey(b.redis.Prefix), flid).Result()
		if n != want || v != (flid == "BUSY") {
			t.Errorf("projection of %s: document %d version kept %v", flid, n, v)
		}
	}
	for job, want := range map[string]float64{"proc_state": 3, "msg_event": 3, "schd_snap_log": 3, "req_track": 3, "schd_republish": 3,
		"projection_rebuild": 3, historyJob: 2} {
		if got := testutil.ToFloat64(c.metrics.lastDeleted.WithLabelValues(job)); got != want {
			t.Errorf("last_sweep_deleted{%s} = %v, want %v", job, got, want)
		}
	}
}

// The history sweep waits for the pump's processing step (the pipeline lock); a step that
// outlasts the statement bound makes the flight wait for the next round, whole.
func TestHistorySweepYieldsToThePump(t *testing.T) {
	c, b := setup(t, nil)
	b.flightRow(t, "PAST", "2026-03-01", "ACTIVE", "01MAR260910", now.Add(-time.Hour))
	ctx := t.Context()
	pump, err := pgx.Connect(ctx, b.pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pump.Close(context.Background())
	if err := pgtest.LockPipeline(ctx, pump); err != nil {
		t.Fatal(err)
	}
	c.RunOnce(ctx, b.sess)
	if got := b.list(t, `SELECT flid FROM flight_schd`); got != "PAST" {
		t.Fatalf("flight moved while the pump held the pipeline lock: %q", got)
	}
	if got := b.list(t, `SELECT flid FROM flight_history`); got != "" {
		t.Fatalf("history written while the move failed: %q", got)
	}
	if err := leader.UnlockPipeline(ctx, pump); err != nil {
		t.Fatal(err)
	}
	c.RunOnce(ctx, b.sess)
	if got := b.list(t, `SELECT flid FROM flight_history`); got != "PAST" {
		t.Fatalf("flight not moved once the pump released the lock: %q", got)
	}
}

// With Redis unreachable the projection cannot be removed, so nothing is moved: no history
// row, no deletion, no tombstone.
func TestHistorySweepWithRedisDownMovesNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c, b := setup(t, func(b *bundle) Forgetter {
		down := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 300 * time.Millisecond})
		t.Cleanup(func() { _ = down.Close() })
		return NewRedisForgetter(down, b.redis.Prefix, time.Second)
	})
	b.flightRow(t, "PAST", "2026-03-01", "ACTIVE", "01MAR260910", now.Add(-time.Hour))
	c.RunOnce(t.Context(), b.sess)
	for _, check := range []struct{ sql, want string }{
		{`SELECT flid FROM flight_schd`, "PAST"},
		{`SELECT flid FROM flight_gtdt`, ""},
		{`SELECT flid FROM flight_history`, ""},
		{`SELECT partition_key FROM msg_event`, ""},
	} {
		if got := b.list(t, check.sql); got != check.want {
			t.Errorf("%s = %q, want %q", check.sql, got, check.want)
		}
	}
	if got := testutil.ToFloat64(c.metrics.failed.WithLabelValues("projection")); got != 1 {
		t.Errorf("history_failed{projection} = %v, want 1", got)
	}
}
