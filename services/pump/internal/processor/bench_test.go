package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/redistest"
)

const (
	benchFlights = 10_000
	benchBatch   = 1_000
)

// benchMessage is the i-th FLOP of the benchmark: STYPs in the mix of a busy day, each on a
// flight of the 10,000 and each changing something.
func benchMessage(i int) string {
	flid := fmt.Sprintf("B%05d", (i*7919)%benchFlights)
	hhmm := fmt.Sprintf("%02d%02d", (i/60)%24, i%60)
	switch i % 8 {
	case 0:
		return flopXML(i, flid, "ESTT", `<ESTT>30NOV26`+hhmm+`</ESTT>`)
	case 1:
		return flopXML(i, flid, "GTDT", fmt.Sprintf(`<GTDT GTNO="1"><GATE>G%d</GATE><PGOT>30NOV26%s</PGOT><GTYP>D</GTYP></GTDT>`, i%60, hhmm))
	case 2:
		return flopXML(i, flid, "CKDT", fmt.Sprintf(`<CKDT CKNO="1"><CHKC>C%02d</CHKC></CKDT><CKDT CKNO="2"><CHKC>C%02d</CHKC></CKDT>`, i%40, i%40+1))
	case 3:
		return flopXML(i, flid, "BOTM", `<BOTM>30NOV26`+hhmm+`</BOTM>`)
	case 4:
		return flopXML(i, flid, "REMC", fmt.Sprintf(`<REMC>请旅客留意登机口变更 %d</REMC>`, i))
	case 5:
		return flopXML(i, flid, "STND", fmt.Sprintf(`<STND>%d</STND>`, 100+i%300))
	case 6:
		return flopXML(i, flid, "PSDT", fmt.Sprintf(`<PSDT PSNO="1"><PSST>%d</PSST><STST>30NOV26%s</STST></PSDT>`, 100+i%300, hhmm))
	default:
		return flopXML(i, flid, "ACTT", `<ACTT>30NOV26`+hhmm+`</ACTT>`)
	}
}

// BenchmarkPumpFLOP measures FLOP messages per second through the full pump (inbox read from
// MariaDB, decode, identity, the domain rules in a PostgreSQL transaction under the pipeline
// lock, the Redis projection, the terminal commit) on a table of 10,000 flights.
func BenchmarkPumpFLOP(b *testing.B) {
	ctx := context.Background()
	pg, my, rd := pgtest.New(b), mysqltest.New(b), redistest.New(b)
	seedFlights(b, pg)
	in, err := aodb.Open(my.ServiceDSN, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = in.Close() })
	tel, err := telemetry.New(ctx, "msgx-pump-bench")
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	zoneDays := flight.DayRule{Zone: zone}
	pumpConfig := pump.FromConfig(config.Default())
	pumpConfig.Codec.Zone = zone
	p := pump.New(pumpConfig,
		in, projection.New(rd.Client, rd.Prefix, 5*time.Second), processor.Route(zoneDays, processor.WithMetrics(reg)),
		clock.Real{}, slog.New(slog.DiscardHandler), tel, reg)
	s := pg.Session(b)

	next := 1
	var busy time.Duration
	var done int
	for b.Loop() {
		b.StopTimer()
		rows := make([]queue.NewMessage, 0, benchBatch)
		var last int64
		for range benchBatch {
			id := my.InsertInbox(b, benchMessage(next), nil)
			next++
			rows = append(rows, queue.NewMessage{MsgID: id})
			last = id
		}
		if _, err := queue.Enqueue(ctx, pg.Pool, rows, time.Now()); err != nil {
			b.Fatal(err)
		}
		// What ingest does: the watermark covers the new rows.
		pg.Exec(b, `UPDATE inbox_cursor SET w = $1 WHERE id = 1`, last)
		b.StartTimer()

		start := time.Now()
		for {
			if _, err := p.Tick(ctx, s); err != nil {
				b.Fatal(err)
			}
			_, ok, err := queue.Head(ctx, pg.Pool)
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				break
			}
		}
		busy += time.Since(start)
		done += benchBatch
	}
	var succeeded int
	if err := pg.Pool.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE state = 'SUCCEEDED'`).Scan(&succeeded); err != nil {
		b.Fatal(err)
	}
	if succeeded != done {
		b.Fatalf("%d of %d messages SUCCEEDED", succeeded, done)
	}
	b.ReportMetric(float64(done)/busy.Seconds(), "msgs/s")
}

// seedFlights writes 10,000 active flights with a plan (scalars, a route point, a gate) in a
// few statements: the table the FLOPs land on.
func seedFlights(b *testing.B, pg *pgtest.DB) {
	b.Helper()
	pg.Exec(b, `INSERT INTO flight_schd (flid, state, state_version, operation_day, last_msg_id, created_at, updated_at,
			collections_present, ffid, alcd, flno, mvin, sodt, flty, flin, acft, trml, stnd)
		SELECT 'B' || lpad(g::text, 5, '0'), 'ACTIVE', 1, DATE '2026-11-30', 0, now(), now(), '{GTDT,ROUT}',
			'CA-CA' || g || '-D-30NOV260900-D', 'CA', 'CA' || g, CASE WHEN g % 2 = 0 THEN 'D' ELSE 'A' END,
			'30NOV260900', 'J', 'D', '320', 'T2', '101'
		FROM generate_series(0, $1 - 1) g`, benchFlights)
	pg.Exec(b, `INSERT INTO flight_route_point (flid, route_kind, ordinal, rtno, apcd)
		SELECT flid, 'ROUT', 1, '1', 'PEK' FROM flight_schd`)
	pg.Exec(b, `INSERT INTO flight_gtdt (flid, ordinal, gtno, gate) SELECT flid, 1, '1', 'A1' FROM flight_schd`)
	pg.Exec(b, `ANALYZE`)
}

// BenchmarkApplyFLOP measures the domain step alone: decode plus step ① (load the flight and its
// code-share group, the rules, save, outbox) in one transaction per message, on 10,000 flights.
// The difference to BenchmarkPumpFLOP is the pump's own bookkeeping and the projection.
func BenchmarkApplyFLOP(b *testing.B) {
	ctx := context.Background()
	pg := pgtest.New(b)
	seedFlights(b, pg)
	route := processor.Route(flight.DayRule{Zone: zone})
	i := 0
	for b.Loop() {
		for range benchBatch {
			i++
			m, err := sis.Decode(benchMessage(i), sis.Options{Zone: zone})
			if err != nil {
				b.Fatal(err)
			}
			proc, _ := route(m)
			tx, err := pg.Pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := proc.Apply(ctx, tx, pump.Input{MsgID: int64(i), Message: m, Now: time.Now()}); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "msgs/s")
}
