package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
	"github.com/msgexchange/msgexchange/pkg/traffic"
	"github.com/msgexchange/msgexchange/services/pump/internal/processor"
	"github.com/msgexchange/msgexchange/services/pump/internal/pump"
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
		pg := newEnv(t).pg
		cfg, err := pgx.ParseConfig(pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		rt := &roundTrips{}
		cfg.Tracer = rt
		conn, err := pgx.ConnectConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(context.Background()) }()
		proc := processor.NewSchedule(flight.DayRule{Zone: zone}, processor.WithBatchSize(1000))
		flights := traffic.Schedule(int64(n), day, n+1)
		apply := func(msgID int64, fs []traffic.Flight) pump.Result {
			t.Helper()
			m, err := sis.Decode(traffic.DNLD(msgID, day, fs), sis.Options{Zone: zone})
			if err != nil {
				t.Fatal(err)
			}
			var res pump.Result
			if err := db.WithTx(t.Context(), conn, func(tx pgx.Tx) error {
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
