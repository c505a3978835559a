package delivery_test

import (
	"fmt"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/benchreport"
)

const backlog = 50_000

// brokers are what the dispatcher's benches drain to, in turns within one run: the shared real
// broker, whose figure make bench reports, and the in-process kfake the figures were measured on
// before, printed beside it (docs/performance.md, "The real broker beside kfake").
var brokers = []struct {
	name   string
	on     func(testing.TB, map[string]string) *broker
	prefix string // of the figure's name in the bench report
}{
	{"kafka", sharedBroker, ""},
	{"kfake", fakeBroker, "kfake-"},
}

// BenchmarkDrainMsgBacklog: events/s from a backlog of 50k KAFKA:msg events (5,000 FLIDs with
// 10 events each, interleaved as the pump writes them) to all acknowledged and marked SENT.
func BenchmarkDrainMsgBacklog(b *testing.B) {
	drainBench(b, "dispatcher-msg", outbox.TargetMsg, func() []outbox.NewEvent {
		events := make([]outbox.NewEvent, 0, backlog)
		for v := int64(1); len(events) < backlog; v++ {
			for i := 0; i < 5000 && len(events) < backlog; i++ {
				events = append(events, msgEvent(fmt.Sprintf("FLID%05d", i), v))
			}
		}
		return events
	}, func(b *testing.B, f *fixture) int {
		read, _, err := f.d.SendOrdered(b.Context(), f.s, f.msg)
		if err != nil {
			b.Fatal(err)
		}
		return read
	})
}

// BenchmarkDrainSchdBacklog: rows/s from 50k pending KAFKA:schd rows (one per FLID) to all
// acknowledged and marked, with flushes back to back: the capacity of the mechanism. In
// service the flush runs once per schd.flush-period, so the rate is also capped at
// flush-limit / flush-period (500 / 3s by default).
func BenchmarkDrainSchdBacklog(b *testing.B) {
	drainBench(b, "dispatcher-schd", outbox.TargetSchd, func() []outbox.NewEvent {
		events := make([]outbox.NewEvent, backlog)
		for i := range events {
			events[i] = schdEvent(fmt.Sprintf("FLID%05d", i), 1, outbox.TypeUpsert)
		}
		return events
	}, func(b *testing.B, f *fixture) int {
		n, err := f.d.FlushLatest(b.Context(), f.s, f.schd)
		if err != nil {
			b.Fatal(err)
		}
		return n
	})
}

// drainBench drains the backlog events makes, on each of brokers in turn, by rounds until a
// round finds nothing, checks that every event of target was marked SENT, and reports the rate
// under bench in the bench report.
func drainBench(b *testing.B, bench, target string, events func() []outbox.NewEvent, round func(*testing.B, *fixture) int) {
	for _, br := range brokers {
		b.Run("broker="+br.name, func(b *testing.B) {
			var total int
			for range b.N {
				b.StopTimer()
				f := setup(b, options{on: br.on})
				f.add(events()...)
				b.StartTimer()
				for round(b, f) > 0 {
				}
				b.StopTimer()
				if n := f.count(target, "SENT"); n != backlog {
					b.Fatalf("%d of %d sent", n, backlog)
				}
				total += backlog
			}
			rate := float64(total) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "events/s")
			benchreport.Add(b, benchreport.Figure{Bench: bench, Name: br.prefix + "events-per-s", Value: rate, Unit: "events/s"})
		})
	}
}
