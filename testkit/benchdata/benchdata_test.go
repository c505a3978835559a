package benchdata_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/benchdata"
)

// TestShape checks the generated tables hold the scale's row counts, so a generator that
// silently produced empty tables cannot make the EXPLAIN tests pass.
func TestShape(t *testing.T) {
	db := benchdata.New(t, benchdata.Test)
	z := benchdata.Shape(benchdata.Test)
	for table, want := range map[string]int64{
		"proc_state": z.Messages, "proc_raw": z.Messages, "proc_attempt": z.Messages,
		"flight_schd": z.Flights / 2, "flight_history": z.Flights - z.Flights/2,
		"msg_event": z.Events, "req_track": z.Requests, "schd_snap_log": z.SnapLogs,
	} {
		var n int64
		if err := db.Pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
}

// BenchmarkFullTemplate builds (first run) or reuses the production-sized template and clones
// it: the clone is what every later bench on full tables pays.
func BenchmarkFullTemplate(b *testing.B) {
	for b.Loop() {
		began := time.Now()
		db := benchdata.New(b, benchdata.Full)
		b.ReportMetric(time.Since(began).Seconds(), "s/database")
		var n int64
		if err := db.Pool.QueryRow(b.Context(), "SELECT count(*) FROM proc_state").Scan(&n); err != nil {
			b.Fatal(err)
		}
		if want := benchdata.Shape(benchdata.Full).Messages; n != want {
			b.Fatalf("proc_state has %d rows, want %d", n, want)
		}
	}
}
