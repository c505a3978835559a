package e2e

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// BenchmarkPipeline measures the whole system on one generated day of traffic: rows/s from
// the inbox insert to the processed marker, and the latency from the inbox commit to the
// broker's acknowledgement of the message's first KAFKA:msg event (p50/p99). Run with
// -benchtime 1x: every iteration is a full day through five processes.
func BenchmarkPipeline(b *testing.B) {
	for b.Loop() {
		runDay(b)
	}
}

func runDay(b *testing.B) {
	e := newEnv(b)
	e.startAll(b)
	msgs := traffic.Day(traffic.Options{Flights: 200, Seed: 7})
	inserted := make(map[int64]time.Time, len(msgs))
	ids := make([]int64, len(msgs))
	start := time.Now()
	for i, m := range msgs {
		now := time.Now()
		ids[i] = e.my.InsertInbox(b, m.XML, &now)
		inserted[ids[i]] = time.Now()
	}
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var marked int
		if err := e.my.Admin.QueryRowContext(ctx, `SELECT COUNT(CMINMSGS_DATE_PROCESSED) FROM cminmsgs`).Scan(&marked); err != nil {
			b.Fatal(err)
		}
		var pending int
		if err := e.pg.Pool.QueryRow(ctx, `SELECT count(*) FROM msg_event WHERE state = 'PENDING'`).Scan(&pending); err != nil {
			b.Fatal(err)
		}
		if marked == len(msgs) && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not drained: %d of %d marked, %d events pending", marked, len(msgs), pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	// Latency: inbox commit → the consumer receiving the message's first KAFKA:msg record,
	// an upper bound of the broker's acknowledgement.
	rows, err := e.pg.Pool.Query(ctx, `SELECT msg_id, min(event_id) FROM msg_event WHERE target = 'KAFKA:msg' GROUP BY msg_id`)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for rows.Next() {
		var msgID, eventID int64
		if err := rows.Scan(&msgID, &eventID); err != nil {
			b.Fatal(err)
		}
		if at := e.records.receivedAt(eventID); !at.IsZero() {
			lat = append(lat, at.Sub(inserted[msgID]))
		}
	}
	rows.Close()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(len(msgs))/elapsed.Seconds(), "rows/s")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	}
	b.Logf("%d rows in %s; %d latency samples", len(msgs), elapsed.Round(time.Millisecond), len(lat))
	b.StartTimer()
}
