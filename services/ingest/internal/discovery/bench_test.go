package discovery

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

const backlog = 100_000

// BenchmarkDiscoveryBacklog measures how fast discovery enqueues a 100k-row inbox backlog
// (a historical backlog's enqueue, R-PUMP-2) per claim-batch size, on the real servers: rounds back to back, each
// one inbox read and one PostgreSQL transaction. It reports rows/s; run with -benchtime 1x.
func BenchmarkDiscoveryBacklog(b *testing.B) {
	my := mysqltest.New(b)
	fillInbox(b, my)
	in, err := aodb.Open(my.ServiceDSN, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	tel, err := telemetry.New(b.Context(), "msgx-ingest-bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{100, 500, 2000} {
		b.Run(fmt.Sprintf("claim-batch=%d", batch), func(b *testing.B) {
			pg := pgtest.New(b)
			txer := pg.Session(b)
			cfg := Config{PollInterval: time.Second, ClaimBatch: batch, MaxCommitDelay: 5 * time.Minute,
				LateDetectPeriod: time.Minute, LateWatchRetention: time.Hour}
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				if _, err := pg.Pool.Exec(b.Context(), `TRUNCATE proc_state CASCADE; UPDATE inbox_cursor SET w = 0, hole_since = NULL`); err != nil {
					b.Fatal(err)
				}
				p := New(cfg, in, clock.Real{}, slog.New(slog.NewTextHandler(io.Discard, nil)), tel, prometheus.NewRegistry())
				b.StartTimer()
				start := time.Now()
				for {
					progress, err := p.Round(b.Context(), txer)
					if err != nil {
						b.Fatal(err)
					}
					if !progress.Full {
						break
					}
				}
				elapsed += time.Since(start)
			}
			var n int64
			if err := pg.Pool.QueryRow(b.Context(), `SELECT count(*) FROM proc_state`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n != backlog {
				b.Fatalf("enqueued %d rows, want %d", n, backlog)
			}
			b.ReportMetric(float64(backlog)*float64(b.N)/elapsed.Seconds(), "rows/s")
		})
	}
}

// fillInbox writes the backlog with multi-row INSERTs. Discovery reads only the ID and the
// received time, so the message text is a placeholder.
func fillInbox(b *testing.B, my *mysqltest.DB) {
	const perStatement = 2000
	received := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	values := strings.TrimSuffix(strings.Repeat("('<MSG/>', ?, 'VALID'),", perStatement), ",")
	args := make([]any, perStatement)
	for i := range args {
		args[i] = received
	}
	for range backlog / perStatement {
		if _, err := my.Admin.ExecContext(b.Context(), `INSERT INTO cminmsgs
			(CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES `+values, args...); err != nil {
			b.Fatal(err)
		}
	}
}
