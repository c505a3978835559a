package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/testkit/benchdata"
	"github.com/msgexchange/msgexchange/testkit/benchreport"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/traffic"
	"github.com/msgexchange/msgexchange/tools/stack"
)

// The load benches of docs/performance.md. Each prints its figures and appends them to the
// `make bench` report (testkit/benchreport), with the anchor measured on the same server in the
// same run. Run with -benchtime 1x.

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// today's schedule of n flights, so the history sweep leaves them alone.
func todaysFlights(n int) []traffic.Flight {
	now := time.Now().In(airport)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, airport)
	return traffic.Schedule(11, day, n)
}

// remark is a FLOP REMC of f: a real change of one flight.
func remark(seq int64, f traffic.Flight, text string) string {
	return traffic.FLOP(seq, time.Now(), f.FLID, f.FFID(), "REMC", "    <REMC>"+text+"</REMC>\n")
}

// bulkInbox writes messages into the inbox with multi-row INSERTs (as upstream would, only
// faster) and returns their IDs in order.
func (e *env) bulkInbox(b testing.TB, xmls []string) []int64 {
	b.Helper()
	return e.my.InsertInboxRows(b, xmls, time.Now())
}

// progress counts, for the messages from first on, the terminal ones, the marked ones and the
// events not yet sent.
func (e *env) progress(b testing.TB, first int64) (terminal, marked, pending int) {
	b.Helper()
	ctx := context.Background()
	if err := e.pg.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')) FROM proc_state
		WHERE msg_id >= $1`, first).Scan(&terminal); err != nil {
		b.Fatal(err)
	}
	if err := e.pg.Pool.QueryRow(ctx, `SELECT count(*) FROM msg_event WHERE state = 'PENDING'`).Scan(&pending); err != nil {
		b.Fatal(err)
	}
	if err := e.my.Admin.QueryRowContext(ctx, `SELECT COUNT(CMINMSGS_DATE_PROCESSED) FROM cminmsgs WHERE CMINMSGS_ID >= ?`,
		first).Scan(&marked); err != nil {
		b.Fatal(err)
	}
	return terminal, marked, pending
}

// settle runs until every message from first on (n of them) is terminal, marked and sent.
func (e *env) settle(b testing.TB, first int64, n int, limit time.Duration) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for {
		t, m, p := e.progress(b, first)
		if t == n && m == n && p == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("not settled after %s: %d of %d terminal, %d marked, %d events pending", limit, t, n, m, p)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// settleProjection runs until the backfill's first rebuild of the whole projection is done: a
// first start finds Redis without the projection's sentinel key and rebuilds every flight
// PostgreSQL holds (docs/redis.md, "Redis lost its data"). On production-sized tables that is
// 100,000 flights, minutes of the backfill's work under the pipeline lock, which a bench run
// into it would count as the pipeline's cost; in production Redis holds the projection.
func (e *env) settleProjection(b testing.TB, limit time.Duration) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for {
		var open, all int
		if err := e.pg.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state IN ('PENDING', 'RUNNING')),
			count(*) FROM projection_rebuild`).Scan(&open, &all); err != nil {
			b.Fatal(err)
		}
		if all > 0 && open == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the projection's first rebuild not done after %s (%d jobs, %d open)", limit, all, open)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// rssKiB is a process's resident set in KiB, 0 when it cannot be read (the sampler goes on).
func rssKiB(pid int) int64 {
	b, err := readRSS(pid)
	if err != nil {
		return 0
	}
	return b >> 10
}

// BenchmarkBacklog drains a FLOP backlog (MSGX_BENCH_BACKLOG messages, 20 000 by default,
// across 2 000 flights of today's schedule) through the five services: the rows are in the
// inbox before the services start, so the figure is the pipeline's own pace, discovery
// included. drain = messages terminal per second, settled = marked and every event sent. The
// anchor (pgtest.CommitRate) runs on the same server with the services stopped, before and
// after the drain; their mean is the figure. Every
// second the resident set of each service is sampled: the growth is its largest RSS after the
// first 10 % of the backlog over its RSS at 10 %. MSGX_BENCH_BACKLOG=100000 is the long RSS
// run (opt-in: it takes minutes).
func BenchmarkBacklog(b *testing.B) { backlog(b, "backlog", newEnv, stack.Services) }

// BenchmarkBacklogPumpAlone is BenchmarkBacklog's backlog drained by the pump's binary with no
// other service beside it: ingest discovers every row first and stops, then the pump alone runs
// until every message is terminal (nothing marks the inbox or sends the events meanwhile).
// Target 2 compares the five services' drain with it: the same binary, configuration, backlog
// and flights, so the ratio is what the other services running beside the pump cost it
// (docs/performance.md, "The five services beside the pump").
func BenchmarkBacklogPumpAlone(b *testing.B) { backlog(b, "backlog-pump", newEnv, []string{"pump"}) }

// noSweep are retentions past the rows testkit/benchdata generates: the tables stay at the
// retention limits with nothing expired, so a bench on them measures the pipeline, not the
// retention sweeps, which BenchmarkSteadyDuringSweep measures on their own. The template's
// times count back from its build, at most a day earlier (benchdata keys it by the day), so
// up to a day of the oldest processing records may have aged past the 7d limit: the longest
// pause makes their sweep a batch every few seconds, too little to show.
var noSweep = []string{"MSGX_PIPELINE_PROC_RETENTION=7d", "MSGX_PIPELINE_EVENT_RETENTION=30d",
	"MSGX_SCHD_SNAP_LOG_RETENTION=3650d", "MSGX_PIPELINE_REQ_RETENTION=3650d", "MSGX_RETENTION_PAUSE=10s"}

// BenchmarkBacklogFullTables is BenchmarkBacklog on production-sized tables at the retention
// limits (testkit/benchdata, MSGX_BENCH_SCALE of production, 1 by default): the drain must keep
// ≥ 0.90 of the empty schema's rate (docs/performance.md, "Cost flat as the data grows"). The
// generated messages hold IDs 1 … N, so the inbox holds N (processed) and the cursor is at N,
// as after a cutover seed.
func BenchmarkBacklogFullTables(b *testing.B) {
	scale := benchScale()
	backlog(b, "backlog-full", func(t testing.TB) *env { return fullTablesEnv(t, scale) }, stack.Services, noSweep...)
}

// benchScale is MSGX_BENCH_SCALE, the share of production the generated tables hold (1 by
// default).
func benchScale() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("MSGX_BENCH_SCALE"), 64); err == nil && v > 0 {
		return v
	}
	return benchdata.Full
}

// fullTablesEnv is an env on production-sized tables at the retention limits (testkit/benchdata).
// The generated messages hold IDs 1 … N, so the inbox holds N (processed) and the cursor is at
// N, as after a cutover seed.
func fullTablesEnv(t testing.TB, scale float64) *env {
	pg := benchdata.New(t, scale)
	n := benchdata.Shape(scale).Messages
	pg.Exec(t, `UPDATE inbox_cursor SET w = $1, scanned_to = $1, seeded_at = now(), seed_mode = 'id', seed_value = $1`, n)
	// The inbox's largest ID must not be below W (that is the contract violation
	// inbox-behind-watermark): its row N is the last generated message, processed.
	my := mysqltest.New(t)
	if _, err := my.Admin.ExecContext(t.Context(), `INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG,
		CMINMSGS_DATE_RECEIVED, CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS) VALUES (?, '<MSG/>', NOW(), NOW(), 'SUCCEEDED')`, n); err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, binaries(t), my, pg)
}

// backlog runs the backlog bench on the env newEnv makes, with settings for every service; the
// drain runs the services of drainers. Without ingest among them, ingest discovers the whole
// backlog before the timer starts, and the drain ends when every message is terminal.
func backlog(b *testing.B, bench string, newEnv func(testing.TB) *env, drainers []string, settings ...string) {
	n := envInt("MSGX_BENCH_BACKLOG", 20000)
	flights := envInt("MSGX_BENCH_FLIGHTS", 2000)
	// The services as they ship: the marker and KAFKA:schd periods newEnv shortens decide when
	// the backlog is settled.
	settings = append(serviceDefaults(), settings...)
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b)
		e.startAllWith(b, settings...)
		day := todaysFlights(flights)
		setup := e.bulkInbox(b, []string{traffic.DNLD(1, time.Now(), day)})
		e.settle(b, setup[0], 1, 5*time.Minute)
		e.settleProjection(b, 15*time.Minute)
		for _, r := range stack.Services {
			e.stack.Stop(r, 10*time.Second)
		}
		commits := pgtest.CommitRate(b, e.pg.DSN, 2000)
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = remark(int64(i+2), day[i%flights], fmt.Sprintf("REMARK %d", i))
		}
		ids := e.bulkInbox(b, msgs)
		alone := !slices.Contains(drainers, "ingest")
		if alone {
			e.discover(b, ids[0], n, settings)
		}
		watch, err := pgx.Connect(context.Background(), e.pg.DSN)
		if err != nil {
			b.Fatal(err)
		}
		cpu0, cpuKnown := pgtest.ServerCPU(watch)
		var cpu time.Duration
		load := loadAverage()
		b.StartTimer()

		began := time.Now()
		for _, r := range drainers {
			if err := e.stack.Start(r, nil, settings...); err != nil {
				b.Fatal(err)
			}
		}
		var drained, settled, markedAll, sentAll time.Duration
		var at10 map[string]int64
		peak := map[string]int64{}
		deadline := began.Add(time.Duration(n)*50*time.Millisecond + 5*time.Minute)
		next := began
		for settled == 0 {
			if time.Now().After(deadline) {
				t, m, p := e.progress(b, ids[0])
				b.Fatalf("backlog not settled: %d of %d terminal, %d marked, %d events pending", t, n, m, p)
			}
			t, m, p := e.progress(b, ids[0])
			if now := time.Now(); !now.Before(next) {
				next = now.Add(time.Second)
				cur := map[string]int64{}
				for _, r := range drainers {
					cur[r] = rssKiB(e.stack.PID(r))
				}
				switch {
				case at10 == nil && t >= n/10:
					at10 = cur
				case at10 != nil:
					for r, v := range cur {
						peak[r] = max(peak[r], v)
					}
				}
			}
			if drained == 0 && t == n {
				drained = time.Since(began)
				if cpu1, ok := pgtest.ServerCPU(watch); ok && cpuKnown {
					cpu = cpu1 - cpu0
				}
			}
			// Where settled loses to the drain: the last marker, and the last event sent.
			if markedAll == 0 && m == n {
				markedAll = time.Since(began)
			}
			if sentAll == 0 && t == n && p == 0 {
				sentAll = time.Since(began)
			}
			if t == n && (alone || m == n && p == 0) {
				settled = time.Since(began)
			}
			// Often enough for the figures (a quarter second of a drain of a minute), seldom
			// enough that the counting does not take the CPU it measures.
			time.Sleep(250 * time.Millisecond)
		}
		b.StopTimer()
		_ = watch.Close(context.Background())
		// The anchor once more, the services stopped again: the shared machine's pace moves
		// within a minute, so the drain is measured against the mean of before and after.
		for _, r := range stack.Services {
			e.stack.Stop(r, 10*time.Second)
		}
		before, after := commits, pgtest.CommitRate(b, e.pg.DSN, 2000)
		commits = (before + after) / 2
		drain, settle := float64(n)/drained.Seconds(), float64(n)/settled.Seconds()
		figs := []benchreport.Figure{
			{Bench: bench, Name: "messages", Value: float64(n)},
			{Bench: bench, Name: "load-average", Value: load},
			{Bench: bench, Name: "drain-msgs-per-s", Value: drain, Unit: "msgs/s"},
			{Bench: bench, Name: "settled-msgs-per-s", Value: settle, Unit: "msgs/s"},
			{Bench: bench, Name: "anchor-commits-per-s", Value: commits, Unit: "commits/s"},
			{Bench: bench, Name: "drain-per-commit", Value: drain / commits},
		}
		if cpu > 0 {
			// The server's CPU per message, the cost a growing table adds that a wall clock on
			// a shared machine hides (docs/performance.md, "Cost flat as the data grows").
			figs = append(figs, benchreport.Figure{Bench: bench, Name: "pg-cpu-ms-per-msg", Value: float64(cpu) / float64(time.Millisecond) / float64(n), Unit: "ms"})
		}
		growth := 0.0
		var rssLine []string
		for _, r := range stack.Services {
			if at10 == nil || at10[r] == 0 || peak[r] == 0 {
				continue
			}
			g := float64(peak[r]) / float64(at10[r])
			growth = max(growth, g)
			figs = append(figs, benchreport.Figure{Bench: bench, Name: "rss-growth-" + r, Value: g})
			rssLine = append(rssLine, fmt.Sprintf("%s %d→%d kB", r, at10[r], peak[r]))
		}
		if growth > 0 {
			figs = append(figs, benchreport.Figure{Bench: bench, Name: "rss-growth-max", Value: growth})
		}
		benchreport.Add(b, figs...)
		b.ReportMetric(drain, "drain-msgs/s")
		b.ReportMetric(settle, "settled-msgs/s")
		b.ReportMetric(commits, "pg-commits/s")
		b.ReportMetric(drain/commits, "drain-per-commit")
		if !alone {
			// After the drain: the inbox's last marker, and the last event sent (the KAFKA:msg
			// lane and the KAFKA:schd lane's next flush).
			figs = append(figs, benchreport.Figure{Bench: bench, Name: "marked-after-drain-s", Value: max(markedAll-drained, 0).Seconds(), Unit: "s"},
				benchreport.Figure{Bench: bench, Name: "sent-after-drain-s", Value: max(sentAll-drained, 0).Seconds(), Unit: "s"})
			b.Logf("%s: after the drain the last marker came %s later, the last event was sent %s later (load average %.2f at the start)",
				bench, max(markedAll-drained, 0).Round(time.Millisecond), max(sentAll-drained, 0).Round(time.Millisecond), load)
		}
		b.Logf("%s: %d FLOPs across %d flights terminal in %s (%.0f msgs/s), settled in %s (%.0f msgs/s); "+
			"one connection commits %.0f/s (%.0f before, %.0f after): drain ratio %.3f, settled/drain %.3f; RSS at 10%% → peak: %s",
			bench, n, flights, drained.Round(time.Millisecond), drain, settled.Round(time.Millisecond), settle, commits, before, after,
			drain/commits, settle/drain, strings.Join(rssLine, ", "))
		b.StartTimer()
	}
}

// BenchmarkSteady offers 50 FLOPs a second for MSGX_BENCH_STEADY seconds (30 by default) at
// pipeline.poll-interval 1s and 100ms, and measures what a user measures: the time from the inbox
// commit (the insert returning) to the message's first KAFKA:msg event marked SENT (after the
// broker's acknowledgement), every message counted, the first second too. The targets:
// p50 ≤ poll/2 + 60 ms and p99 ≤ poll + 150 ms. The services run at their defaults (the
// backfill's and the KAFKA:schd lane's periods too, which the other e2e tests shorten), so what
// they do beside the pipeline falls inside the window as it does in service. Ingest runs on its
// default busy cadence (R-INGEST-13): under this traffic it reads the inbox every
// pipeline.busy-poll-interval, not every poll.
func BenchmarkSteady(b *testing.B) {
	seconds := envInt("MSGX_BENCH_STEADY", 30)
	for _, poll := range []time.Duration{time.Second, 100 * time.Millisecond} {
		b.Run("poll="+poll.String(), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				steady(b, "steady-"+poll.String(), newEnv(b), poll, seconds, nil, serviceDefaults()...)
			}
		})
	}
}

// BenchmarkMarkerPeriod runs BenchmarkSteady's traffic at poll 100ms twice in one run: with the
// backfill's marker rounds every 30 s (the default before) and at the default period, and reports
// the p99 of the first over the second: what the markers' bursts cost the latency's tail
// (docs/performance.md, "Latency and memory").
func BenchmarkMarkerPeriod(b *testing.B) {
	seconds := envInt("MSGX_BENCH_STEADY", 30)
	const poll = 100 * time.Millisecond
	def := config.Default().Pipeline.BackfillPeriod
	for b.Loop() {
		b.StopTimer()
		var p99 []time.Duration
		for _, period := range []time.Duration{30 * time.Second, def} {
			settings := append(serviceDefaults(), "MSGX_PIPELINE_BACKFILL_PERIOD="+period.String())
			p99 = append(p99, steady(b, "steady-marker-"+period.String(), newEnv(b), poll, seconds, nil, settings...))
		}
		ratio := float64(p99[0]) / float64(p99[1])
		benchreport.Add(b, benchreport.Figure{Bench: "steady-marker", Name: "p99-30s-over-default", Value: ratio})
		b.Logf("steady 50 msg/s at poll %s: p99 %s with marker rounds every 30s, %s every %s: ratio %.2f", poll,
			p99[0].Round(time.Millisecond), p99[1].Round(time.Millisecond), def, ratio)
	}
}

// serviceDefaults are the settings newEnv shortens for the tests' sake put back at their
// defaults (pkg/config): a bench of what users see runs the services as they ship.
func serviceDefaults() []string {
	d := config.Default()
	return []string{"MSGX_PIPELINE_BACKFILL_PERIOD=" + d.Pipeline.BackfillPeriod.String(),
		"MSGX_SCHD_FLUSH_PERIOD=" + d.Schd.FlushPeriod.String()}
}

// latencySample is one message of the steady traffic: when it was committed into the inbox
// (from the traffic's start) and how long each step took.
type latencySample struct {
	at                       time.Duration // the inbox commit, from the traffic's start
	total                    time.Duration // inbox commit → first KAFKA:msg event SENT
	enqueued, finished, sent time.Duration // commit → enqueued → ③ → SENT
	received                 time.Duration // SENT → the consumer receiving it
	besideMarker             bool          // a backfill marker round committed inside its window
}

// steady runs the steady traffic on e and records its latency figures under name; settings go
// to every service besides the poll interval, and atStart, when set, runs once the set-up is
// done, just before the traffic starts. The timer is stopped on entry.
func steady(b *testing.B, name string, e *env, poll time.Duration, seconds int, atStart func(), settings ...string) (p99 time.Duration) {
	e.startAllWith(b, append([]string{"MSGX_PIPELINE_POLL_INTERVAL=" + poll.String()}, settings...)...)
	const flights, rate = 200, 50
	day := todaysFlights(flights)
	setup := e.bulkInbox(b, []string{traffic.DNLD(1, time.Now(), day)})
	e.settle(b, setup[0], 1, 5*time.Minute)
	e.settleProjection(b, 15*time.Minute)
	if atStart != nil {
		atStart()
	}
	load := loadAverage()
	act := watchActivity(b, e.pg.DSN)
	b.StartTimer()

	n := seconds * rate
	committed := make(map[int64]time.Time, n)
	ids := make([]int64, 0, n)
	tick := time.NewTicker(time.Second / rate)
	began := time.Now()
	for i := range n {
		<-tick.C
		id := e.my.InsertInbox(b, remark(int64(i+2), day[i%flights], fmt.Sprintf("STEADY %d", i)), nil)
		committed[id] = time.Now()
		ids = append(ids, id)
	}
	tick.Stop()
	offered := float64(n) / time.Since(began).Seconds()
	e.settle(b, ids[0], n, 5*time.Minute)
	b.StopTimer()

	samples := e.latencies(b, ids[0], committed, began)
	if len(samples) == 0 {
		b.Fatal("no latency sample")
	}
	slices.SortFunc(samples, func(x, y latencySample) int { return cmp.Compare(x.total, y.total) })
	act.end()
	tail := samples[len(samples)*99/100:]
	tailFrom, tailTo := tail[0].at, tail[0].at+tail[0].total
	for _, x := range tail {
		tailFrom, tailTo = min(tailFrom, x.at), max(tailTo, x.at+x.total)
	}
	roles := []string{"ingest", "pump", "dispatcher"}
	at := func(q float64) time.Duration { return samples[min(int(q*float64(len(samples))), len(samples)-1)].total }
	p50, p90 := at(0.50), at(0.90)
	p99 = at(0.99)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	benchreport.Add(b,
		benchreport.Figure{Bench: name, Name: "offered-msgs-per-s", Value: offered, Unit: "msgs/s"},
		benchreport.Figure{Bench: name, Name: "p50-ms", Value: ms(p50), Unit: "ms"},
		benchreport.Figure{Bench: name, Name: "p90-ms", Value: ms(p90), Unit: "ms"},
		benchreport.Figure{Bench: name, Name: "p99-ms", Value: ms(p99), Unit: "ms"},
		benchreport.Figure{Bench: name, Name: "p50-target-ms", Value: ms(poll/2 + 60*time.Millisecond), Unit: "ms"},
		benchreport.Figure{Bench: name, Name: "p99-target-ms", Value: ms(poll + 150*time.Millisecond), Unit: "ms"},
		benchreport.Figure{Bench: name, Name: "load-average", Value: load})
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.Logf("steady at poll %s: %d FLOPs offered at %.1f msgs/s, load average %.2f; inbox commit → first KAFKA:msg event SENT: "+
		"p50 %s, p90 %s, p99 %s, max %s (targets %s, %s; %d samples)", poll, n, offered, load, p50.Round(time.Millisecond),
		p90.Round(time.Millisecond), p99.Round(time.Millisecond), samples[len(samples)-1].total.Round(time.Millisecond),
		poll/2+60*time.Millisecond, poll+150*time.Millisecond, len(samples))
	b.Logf("steady at poll %s, where the time goes: all %s; the slowest 1 %%: %s", poll, split(samples), split(tail))
	// What the pipeline's backends waited on while the slowest 1 % were on their way, beside
	// the same over the whole traffic.
	b.Logf("steady at poll %s, PostgreSQL while the slowest 1 %% were on their way (%s–%s): %s", poll, tailFrom.Round(time.Millisecond),
		tailTo.Round(time.Millisecond), act.describe(began.Add(tailFrom), began.Add(tailTo), roles...))
	b.Logf("steady at poll %s, PostgreSQL over the whole traffic: %s", poll, act.describe(began, began.Add(time.Duration(seconds)*time.Second), roles...))
	for _, r := range roles {
		_, whole := act.busy(r, began, began.Add(time.Duration(seconds)*time.Second), []string{"wal-flush"})
		busyTail, inTail := act.busy(r, began.Add(tailFrom), began.Add(tailTo), []string{"wal-flush"})
		benchreport.Add(b, benchreport.Figure{Bench: name, Name: r + "-wal-flush-share", Value: whole[0]},
			benchreport.Figure{Bench: name, Name: r + "-wal-flush-in-tail-s", Value: busyTail.Seconds() * inTail[0], Unit: "s"})
	}
	b.StartTimer()
	return p99
}

// latencies reads, for every message from first on, when each step of its way was done.
func (e *env) latencies(b *testing.B, first int64, committed map[int64]time.Time, began time.Time) []latencySample {
	b.Helper()
	ctx := context.Background()
	// The backfill's marker rounds: each commits its batch's markers with one backfill_at.
	var rounds []time.Time
	rows, err := e.pg.Pool.Query(ctx, `SELECT DISTINCT backfill_at FROM proc_state WHERE msg_id >= $1 AND backfill_at IS NOT NULL`, first)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var t time.Time
		if err := rows.Scan(&t); err != nil {
			b.Fatal(err)
		}
		rounds = append(rounds, t)
	}
	rows.Close()
	rows, err = e.pg.Pool.Query(ctx, `SELECT p.msg_id, e.event_id, p.enqueued_at, p.finished_at, e.sent_at
		FROM proc_state p JOIN LATERAL (SELECT event_id, sent_at FROM msg_event WHERE msg_id = p.msg_id AND target = 'KAFKA:msg'
			ORDER BY event_id LIMIT 1) e ON true
		WHERE p.msg_id >= $1`, first)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []latencySample
	for rows.Next() {
		var msgID, eventID int64
		var enqueued, finished, sentAt time.Time
		if err := rows.Scan(&msgID, &eventID, &enqueued, &finished, &sentAt); err != nil {
			b.Fatal(err)
		}
		c := committed[msgID]
		if c.IsZero() {
			continue
		}
		s := latencySample{at: c.Sub(began), total: sentAt.Sub(c), enqueued: enqueued.Sub(c), finished: finished.Sub(enqueued),
			sent: sentAt.Sub(finished)}
		if r := e.records.receivedAt(eventID); !r.IsZero() {
			s.received = r.Sub(sentAt)
		}
		for _, r := range rounds {
			if !r.Before(c) && !r.After(sentAt) {
				s.besideMarker = true
				break
			}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// split is where the time of samples goes: each step's median, and the share of the samples
// a backfill marker round committed beside, with when the first and last of them were sent.
func split(samples []latencySample) string {
	med := func(f func(latencySample) time.Duration) time.Duration {
		d := make([]time.Duration, len(samples))
		for i, s := range samples {
			d[i] = f(s)
		}
		slices.Sort(d)
		return d[len(d)/2].Round(time.Millisecond)
	}
	beside := 0
	first, last := samples[0].at, samples[0].at
	for _, s := range samples {
		if s.besideMarker {
			beside++
		}
		first, last = min(first, s.at), max(last, s.at)
	}
	return fmt.Sprintf("%d samples committed %s–%s into the traffic, p50 commit→enqueued %s, enqueued→③ %s, ③→SENT %s, SENT→received %s; "+
		"%.0f %% with a backfill marker round inside", len(samples), first.Round(100*time.Millisecond), last.Round(100*time.Millisecond),
		med(func(s latencySample) time.Duration { return s.enqueued }), med(func(s latencySample) time.Duration { return s.finished }),
		med(func(s latencySample) time.Duration { return s.sent }), med(func(s latencySample) time.Duration { return s.received }),
		100*float64(beside)/float64(len(samples)))
}

// loadAverage is the machine's one-minute load average (0 when it cannot be read): on the
// shared 2-core machine it says what else ran beside a figure.
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// BenchmarkSteadyDuringSweep runs the steady traffic (50 FLOPs a second, poll 1s) twice on
// production-sized tables (testkit/benchdata, MSGX_BENCH_SCALE): once with retentions long enough
// that no row is expired, once at the defaults, where the backfill's retention sweeps delete
// the generated expired rows (about 900,000 processing records and 1 M events at full scale)
// while the traffic runs. The target: the p99 with the sweep ≤ 2 × the p99 without
// (docs/performance.md, "Sweeps do not stall the pipeline"). The sweep must still be running
// when the traffic ends, or the run did not measure it: the figure swept-during counts the rows
// it deleted meanwhile.
func BenchmarkSteadyDuringSweep(b *testing.B) {
	seconds := envInt("MSGX_BENCH_STEADY", 20)
	scale := benchScale()
	const poll = time.Second
	for b.Loop() {
		b.StopTimer()
		quiet := steady(b, "steady-no-sweep", fullTablesEnv(b, scale), poll, seconds, nil, noSweep...)
		e := fullTablesEnv(b, scale)
		// Counted as the traffic starts: the sweep runs from the services' start, through the
		// set-up's wait for the projection, and only what it deletes under the traffic counts.
		var before int64
		during := steady(b, "steady-sweep", e, poll, seconds, func() { before = e.expiredRows(b) })
		left := e.expiredRows(b)
		swept := before - left
		if swept <= 0 || left == 0 {
			b.Errorf("the sweep deleted %d of %d expired rows while the traffic ran (%d left): it did not run throughout", swept, before, left)
		}
		benchreport.Add(b,
			benchreport.Figure{Bench: "steady-sweep", Name: "swept-during", Value: float64(swept)},
			benchreport.Figure{Bench: "steady-sweep", Name: "p99-over-no-sweep", Value: float64(during) / float64(quiet)})
		b.Logf("steady 50 msg/s on production-sized tables: p99 %s with the sweep (%d of %d expired rows deleted meanwhile), %s without: ratio %.2f",
			during.Round(time.Millisecond), swept, before, quiet.Round(time.Millisecond), float64(during)/float64(quiet))
	}
}

// expiredRows counts the rows the retention sweeps delete at the default retentions: terminal,
// marked processing records older than a day and sent events older than a week.
func (e *env) expiredRows(b testing.TB) int64 {
	b.Helper()
	var n int64
	if err := e.pg.Pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM proc_state WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NOT NULL
			AND updated_at < now() - interval '1 day')
		+ (SELECT count(*) FROM msg_event WHERE state = 'SENT' AND sent_at < now() - interval '7 days')`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// discover runs ingest alone until every one of the n rows from first on is in proc_state,
// then stops it: the backlog a pump alone drains.
func (e *env) discover(b testing.TB, first int64, n int, settings []string) {
	b.Helper()
	if err := e.stack.Start("ingest", nil, settings...); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var found int
		if err := e.pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM proc_state WHERE msg_id >= $1`, first).Scan(&found); err != nil {
			b.Fatal(err)
		}
		if found == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("ingest discovered %d of %d rows in 5 minutes", found, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.stack.Stop("ingest", 10*time.Second)
}
