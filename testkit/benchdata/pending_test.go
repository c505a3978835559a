package benchdata_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/benchdata"
)

// TestPendingReadOnABacklogOfEvents: the dispatcher's read of the next events costs a few
// buffers per waiting event, not per event of the table, when tens of thousands of events wait
// on a large msg_event (a schedule snapshot's deletions, a broker outage), both before
// autovacuum has analysed the burst (the statistics still count no unsent event) and after.
// The generated events are all SENT, which TestNoFullScanOfGrowingTables cannot show. The
// buffer count is the plan's, not a time: it holds on a loaded machine.
func TestPendingReadOnABacklogOfEvents(t *testing.T) {
	d := benchdata.New(t, benchdata.Test)
	ctx := t.Context()
	// A fifth of the message topic's events waiting, spread over every flight, a few of them
	// backing off: the shape a broker outage leaves; a third of the schedule rows waiting.
	d.Exec(t, `UPDATE msg_event SET state = 'PENDING', sent_at = NULL,
		next_attempt_at = CASE WHEN event_id % 97 = 0 THEN now() + interval '1 minute' END
		WHERE target = 'KAFKA:msg' AND event_id % 5 = 0`)
	d.Exec(t, `UPDATE msg_event SET state = 'PENDING', sent_at = NULL, pending_since = now() WHERE target = 'KAFKA:schd' AND event_id % 3 = 0`)
	for _, stats := range []string{"stale", "analysed"} {
		if stats == "analysed" {
			d.Exec(t, `ANALYZE msg_event`)
		}
		for _, target := range []string{outbox.TargetMsg, outbox.TargetSchd} {
			var waiting int
			if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM msg_event WHERE target = $1 AND state = 'PENDING'`, target).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			rec, traced := tracedPool(t, d.DSN)
			got, err := outbox.Pending(ctx, traced, target, 500, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 500 {
				t.Errorf("%s: %d events read, want a page of 500", target, len(got))
			}
			for _, s := range rec.take() {
				var raw []byte
				if err := d.Pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+s.sql, s.args...).Scan(&raw); err != nil {
					t.Fatal(err)
				}
				var plans []struct {
					Plan struct {
						Hit  int `json:"Shared Hit Blocks"`
						Read int `json:"Shared Read Blocks"`
					}
				}
				if err := json.Unmarshal(raw, &plans); err != nil {
					t.Fatal(err)
				}
				blocks := plans[0].Plan.Hit + plans[0].Plan.Read
				t.Logf("%s, statistics %s: %d buffers for %d waiting events", target, stats, blocks, waiting)
				if blocks > 5*waiting {
					t.Errorf("%s with %s statistics: the read took %d buffers for %d waiting events, more than 5 each: "+
						"it reads the backlog once per candidate", target, stats, blocks, waiting)
				}
			}
		}
	}
}
