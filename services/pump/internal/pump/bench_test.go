package pump_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/benchreport"
	"github.com/msgexchange/msgexchange/pkg/pgtest"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/tools/traffic"
)

// BenchmarkFIFO measures the pump on a FLOP backlog (20k messages by default, or
// MSGX_BENCH_MESSAGES), every message a real change of one of 200 flights, on the real
// servers: msgs/s through the whole of processOne (inbox read, decode, bind, ① under the
// pipeline lock, Redis, ③). In the same run it measures the commit rate of one connection
// running a comparable three-statement transaction (SELECT … FOR UPDATE, UPDATE, INSERT), the
// floor a strictly sequential, durably committing pump is measured against, and prints the
// ratio. Run with -benchtime 1x: one iteration is the whole backlog.
func BenchmarkFIFO(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("MSGX_BENCH_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b)
		e.clkReal()
		trips := pgtest.NewRoundTrips()
		s := e.tracedSession(b, trips)
		p := e.newPump(b, options{quiet: true})
		const flights = 200
		var schedules []string
		for f := range flights {
			schedules = append(schedules, e.adft(strconv.Itoa(5000+f)))
		}
		e.bulkAdd(b, schedules)
		drain(b, p, s, e)
		flops := make([]string, n)
		for i := range flops {
			flid := strconv.Itoa(5000 + i%flights)
			flops[i] = e.remark(flid, fmt.Sprintf("REMARK %d", i))
		}
		first := e.bulkAdd(b, flops)
		trips.Reset()
		cpu0, _ := pgtest.BackendCPU(s.conn)
		b.StartTimer()

		// The pump's own loop (Run), as the service runs it, until the queue is empty (or a
		// head waits for a retry, which the check below reports); the check is one probe of
		// the unfinished index every 20 ms, not a query per message.
		elapsed := runUntilEmpty(b, p, s, e)

		b.StopTimer()
		rt, st := trips.Counts()
		if cpu1, ok := pgtest.BackendCPU(s.conn); ok {
			perMsg := float64((cpu1 - cpu0).Microseconds()) / 1000 / float64(n)
			b.ReportMetric(perMsg, "pg-cpu-ms/msg")
			benchreport.Add(b, benchreport.Figure{Bench: "fifo", Name: "pg-cpu-ms-per-msg", Value: perMsg, Unit: "ms"})
		}
		var ok int
		if err := e.pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM proc_state WHERE msg_id >= $1 AND state = 'SUCCEEDED'`,
			first).Scan(&ok); err != nil {
			b.Fatal(err)
		}
		if ok != n {
			b.Fatalf("%d of %d FLOPs SUCCEEDED", ok, n)
		}
		rate := float64(n) / elapsed.Seconds()
		commits := pgtest.CommitRate(b, e.pg.DSN, 2000)
		b.ReportMetric(rate, "msgs/s")
		b.ReportMetric(commits, "pg-commits/s")
		b.ReportMetric(rate/commits, "msgs-per-commit")
		b.ReportMetric(float64(rt)/float64(n), "pg-roundtrips/msg")
		b.ReportMetric(float64(st)/float64(n), "pg-statements/msg")
		benchreport.Add(b,
			benchreport.Figure{Bench: "fifo", Name: "msgs-per-s", Value: rate, Unit: "msgs/s"},
			benchreport.Figure{Bench: "fifo", Name: "anchor-commits-per-s", Value: commits, Unit: "commits/s"},
			benchreport.Figure{Bench: "fifo", Name: "msgs-per-commit", Value: rate / commits},
			benchreport.Figure{Bench: "fifo", Name: "pg-roundtrips-per-msg", Value: float64(rt) / float64(n)},
			benchreport.Figure{Bench: "fifo", Name: "pg-statements-per-msg", Value: float64(st) / float64(n)})
		b.Logf("FIFO: per message %.2f PostgreSQL round trips, %.2f statements; the most frequent:\n%s",
			float64(rt)/float64(n), float64(st)/float64(n), strings.Join(trips.Top(25), "\n"))
		b.Logf("FIFO: where the lock connection waited on PostgreSQL:\n%s", strings.Join(trips.Waited(25), "\n"))
		b.Logf("FIFO: %d FLOPs in %s = %.0f msgs/s; one connection commits %.0f three-statement transactions/s; ratio %.3f",
			n, elapsed.Round(time.Millisecond), rate, commits, rate/commits)
		b.StartTimer()
	}
}

// bulkAdd inserts messages into the inbox with multi-row INSERTs, enqueues them and moves W
// over them; it returns the first msg_id.
func (e *env) bulkAdd(b testing.TB, xmls []string) int64 {
	b.Helper()
	ctx := context.Background()
	ids := e.my.InsertInboxRows(b, xmls, e.now())
	for i := 0; i < len(ids); i += 1000 {
		part := ids[i:min(i+1000, len(ids))]
		msgs := make([]queue.NewMessage, len(part))
		for j, id := range part {
			msgs[j] = queue.NewMessage{MsgID: id}
		}
		if _, err := queue.Enqueue(ctx, e.pg.Pool, msgs, e.now()); err != nil {
			b.Fatal(err)
		}
	}
	e.pg.Exec(b, `UPDATE inbox_cursor SET w = greatest(w, $1)`, ids[len(ids)-1])
	return ids[0]
}

// BenchmarkScheduleDNLD measures one 2 000-flight SCHD DNLD (a generated day, about 1 KB per
// record, 1.9 MB) through the whole pump on the real servers, from the inbox row to SUCCEEDED:
// inbox read, decode, the whole-package check, the bulk load, the plan, every batch with its
// events and projection, ③. The day already holds 2 200 flights: the package changes all 2 000
// records and deletes the 200 it omits (11 batches of schd.batch-size 200). The same package
// once more, every flight unchanged (only projected), is measured too. In the same run the
// single-connection commit rate of BenchmarkFIFO is measured as the anchor, and the ratio of
// flights/s to it printed. Run with -benchtime 1x.
func BenchmarkScheduleDNLD(b *testing.B) {
	const records, omitted = 2000, 200
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b)
		e.clkReal()
		trips := pgtest.NewRoundTrips()
		s := e.tracedSession(b, trips)
		p := e.newPump(b, options{quiet: true})
		day := time.Date(2026, 3, 2, 0, 0, 0, 0, zone)
		stored := traffic.Schedule(42, day, records+omitted)
		e.bulkAdd(b, []string{e.dnld(stored...)})
		drain(b, p, s, e)
		next := make([]traffic.Flight, records)
		for i, f := range stored[:records] {
			f.RENO = fmt.Sprintf("B%04d", i) // every record a real change
			next[i] = f
		}
		text := e.dnld(next...)
		id := e.bulkAdd(b, []string{text})
		trips.Reset()
		b.StartTimer()

		began := time.Now()
		tick(b, p, s)
		changed := time.Since(began)
		rt, st := trips.Counts()

		b.StopTimer()
		if m := e.get(b, id); m.State != queue.Succeeded {
			b.Fatalf("the DNLD is %s: %s", m.State, deref(m.LastError))
		}
		if n := e.events(b, id); n != records+omitted {
			b.Fatalf("%d KAFKA:msg events, want %d", n, records+omitted)
		}
		again := e.bulkAdd(b, []string{e.dnld(next...)})
		began = time.Now()
		tick(b, p, s)
		unchanged := time.Since(began)
		if m := e.get(b, again); m.State != queue.Succeeded || e.events(b, again) != 0 {
			b.Fatalf("the same DNLD again is %s with %d events", m.State, e.events(b, again))
		}
		commits := pgtest.CommitRate(b, e.pg.DSN, 2000)
		rate := float64(records+omitted) / changed.Seconds()
		b.ReportMetric(changed.Seconds(), "s/package")
		b.ReportMetric(rate, "flights/s")
		b.ReportMetric(unchanged.Seconds(), "s/unchanged-package")
		b.ReportMetric(commits, "pg-commits/s")
		b.ReportMetric(rate/commits, "flights-per-commit")
		benchreport.Add(b,
			benchreport.Figure{Bench: "dnld", Name: "changed-package-s", Value: changed.Seconds(), Unit: "s"},
			benchreport.Figure{Bench: "dnld", Name: "unchanged-package-s", Value: unchanged.Seconds(), Unit: "s"},
			benchreport.Figure{Bench: "dnld", Name: "flights-per-s", Value: rate, Unit: "flights/s"},
			benchreport.Figure{Bench: "dnld", Name: "anchor-commits-per-s", Value: commits, Unit: "commits/s"},
			benchreport.Figure{Bench: "dnld", Name: "pg-roundtrips-per-package", Value: float64(rt)},
			benchreport.Figure{Bench: "dnld", Name: "pg-statements-per-package", Value: float64(st)})
		b.ReportMetric(float64(rt), "pg-roundtrips/package")
		b.ReportMetric(float64(st), "pg-statements/package")
		b.Logf("DNLD: %d records (%.1f MB), %d changed + %d deleted in %s = %.0f flights/s; the same package unchanged in %s; "+
			"one connection commits %.0f three-statement transactions/s; ratio %.2f",
			records, float64(len(text))/1e6, records, omitted, changed.Round(time.Millisecond), rate,
			unchanged.Round(time.Millisecond), commits, rate/commits)
		b.StartTimer()
	}
}

// runUntilEmpty runs the pump's loop until no message is unfinished, or a head waits for a
// retry, and returns how long it ran.
func runUntilEmpty(b *testing.B, p *pump.Pump, s pump.Session, e *env) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- p.Run(ctx, s, nil) }()
	for {
		var busy bool
		if err := e.pg.Pool.QueryRow(b.Context(), `SELECT EXISTS (SELECT 1 FROM proc_state
			WHERE state = 'PENDING' OR (state = 'FAILED' AND next_attempt_at <= now()))`).Scan(&busy); err != nil {
			b.Fatal(err)
		}
		if !busy {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(began)
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
	return elapsed
}
