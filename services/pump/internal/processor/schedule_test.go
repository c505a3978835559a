package processor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// roundTrips counts what a connection sends: each statement and each batch (one round trip
// however many statements it holds).
type roundTrips struct{ n int }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n++
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n++
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A schedule package is loaded, planned and written in a number of round trips that does not
// depend on its size: the same day with 10 or 400 stored flights, the package changing every
// one of them and adding one, in one batch.
func TestScheduleRoundTripsDoNotGrowWithThePackage(t *testing.T) {
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, zone)
	trips := map[int]int{}
	for _, n := range []int{10, 400} {
		rt := &roundTrips{}
		conn := newEnv(t).pg.TracedSession(t, rt)
		proc := processor.NewSchedule(flight.DayRule{Zone: zone}, processor.WithBatchSize(1000))
		flights := traffic.Schedule(int64(n), day, n+1)
		apply := func(msgID int64, fs []traffic.Flight) pump.Result {
			t.Helper()
			m, err := sis.Decode(traffic.DNLD(msgID, day, fs), sis.Options{Zone: zone})
			if err != nil {
				t.Fatal(err)
			}
			var res pump.Result
			if err := conn.Tx(t.Context(), func(tx pgx.Tx) error {
				res, err = proc.Apply(t.Context(), tx, pump.Input{MsgID: msgID, Message: m, Now: day})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return res
		}
		apply(1, flights[:n])
		for i := range flights[:n] {
			flights[i].RENO = fmt.Sprintf("B%04d", i)
		}
		rt.n = 0
		res := apply(2, flights)
		if len(res.Then) != 0 || len(res.Project) != n+1 {
			t.Fatalf("%d flights: %d further steps, %d states to project; want one batch of %d", n, len(res.Then), len(res.Project), n+1)
		}
		trips[n] = rt.n
	}
	t.Logf("round trips %v", trips)
	if trips[10] != trips[400] || trips[10] == 0 {
		t.Errorf("round trips %v: want the same number for both sizes, and some", trips)
	}
}

// statements records the text of every statement a connection sends, batched ones included.
type statements struct{ sql []string }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.sql = append(s.sql, d.SQL)
	return ctx
}
func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (s *statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.sql = append(s.sql, d.SQL)
}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// detailReads counts the detail reads (the ten-table UNION) among sql.
func (s *statements) detailReads() int {
	n := 0
	for _, q := range s.sql {
		if strings.Contains(q, "' AS tag, ordinal") {
			n++
		}
	}
	return n
}

// Route's flight and schedule processors share one DetailCache (D-18): a FLOP of a flight a
// snapshot just wrote, and the same snapshot once more after FLOPs of its flights, read their
// flights' rows without the detail read.
func TestRouteSharesTheDetailCacheBetweenSnapshotsAndFLOPs(t *testing.T) {
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, zone)
	st := &statements{}
	conn := newEnv(t).pg.TracedSession(t, st)
	route := processor.Route(flight.DayRule{Zone: zone})
	apply := func(msgID int64, xml string) int {
		t.Helper()
		m, err := sis.Decode(xml, sis.Options{Zone: zone})
		if err != nil {
			t.Fatal(err)
		}
		proc, why := route(m)
		if proc == nil {
			t.Fatalf("message %d not routed: %s", msgID, why)
		}
		st.sql = nil
		if err := conn.Tx(t.Context(), func(tx pgx.Tx) error {
			_, err := proc.Apply(t.Context(), tx, pump.Input{MsgID: msgID, Message: m, Now: day})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return st.detailReads()
	}
	flights := traffic.Schedule(3, day, 20)
	if n := apply(1, traffic.DNLD(1, day, flights)); n != 0 {
		t.Errorf("first snapshot of an empty day: %d detail reads, want none (nothing stored)", n)
	}
	f := flights[0]
	if n := apply(2, traffic.FLOP(2, day, f.FLID, f.FFID(), "REMC", "<REMC>after the snapshot</REMC>")); n != 0 {
		t.Errorf("FLOP of a flight the snapshot wrote: %d detail reads, want none", n)
	}
	for i := range flights {
		flights[i].RENO = fmt.Sprintf("B%04d", i)
	}
	if n := apply(3, traffic.DNLD(3, day, flights)); n != 0 {
		t.Errorf("snapshot after a FLOP: %d detail reads, want none (every flight written by this pump)", n)
	}
}
