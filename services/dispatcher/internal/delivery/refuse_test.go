package delivery_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/outbox"
)

// bigPayload is a JSON document whose record cannot fit in the broker's default
// message.max.bytes (1048588).
func bigPayload(flid string) []byte {
	return fmt.Appendf(nil, `{"flid":%q,"REMC":%q}`, flid, strings.Repeat("x", config.Default().Kafka.MaxMessageBytes))
}

// TestOversizedEventIsDeadAtOnce: an event whose record is larger than the brokers accept is
// not sent and not retried: one round makes it DEAD with the sizes in last_error, while the
// other FLIDs of the round go out and the oversized FLID's later event waits behind its dead
// letter (docs/dispatcher.md). No lane failure, no charged attempt of anything else.
func TestOversizedEventIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	ctx := t.Context()
	big := msgEvent("BIG", 1)
	big.Payload = bigPayload("BIG")
	f.add(big, msgEvent("OK", 1), msgEvent("BIG", 2), msgEvent("OK", 2))
	if _, _, err := f.d.SendOrdered(ctx, f.s, f.msg); err != nil {
		t.Fatal(err)
	}
	rows := f.rows(outbox.TargetMsg)
	want := []struct {
		state    string
		attempts int
	}{{"DEAD", 1}, {"SENT", 0}, {"PENDING", 0}, {"SENT", 0}}
	for i, r := range rows {
		if r.State != want[i].state || r.Attempts != want[i].attempts {
			t.Errorf("event %d (%s v%d): %s with %d attempts, want %s with %d", r.ID, r.FLID, r.Version, r.State, r.Attempts,
				want[i].state, want[i].attempts)
		}
	}
	var lastError string
	if err := f.db.Pool.QueryRow(ctx, `SELECT last_error FROM msg_event WHERE event_id = $1`, rows[0].ID).Scan(&lastError); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"refused", "kafka.max-message-bytes", "1048588", "key BIG"} {
		if !strings.Contains(lastError, part) {
			t.Errorf("dead letter's last_error %q does not say %q", lastError, part)
		}
	}
	for name, want := range map[string]float64{"msgx_dispatcher_refused_total": 1, "msgx_dispatcher_dead_total": 1,
		"msgx_dispatcher_failed_attempts_total": 0} {
		if got := metricValue(t, f, name, outbox.TargetMsg); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, reason := range []string{"fence", "commit", "transaction"} {
		if n := laneFailures(t, f, outbox.TargetMsg, reason); n != 0 {
			t.Errorf("lane failures (%s) = %v, want 0", reason, n)
		}
	}
	// Later rounds leave the dead letter alone and still hold the FLID behind it.
	f.drainMsg(ctx, 3)
	if rows := f.rows(outbox.TargetMsg); rows[0].State != "DEAD" || rows[0].Attempts != 1 || rows[2].State != "PENDING" {
		t.Errorf("after more rounds: %+v", rows)
	}
	got := consume(t, f.broker.addrs, f.broker.topicMsg, 2)
	if len(got) != 2 || got[0].Key != "OK" || got[1].Key != "OK" {
		t.Errorf("topic holds %+v, want OK's two events only", got)
	}
}

// TestOversizedStateIsDeadUntilTheNextState: on KAFKA:schd a state too large for the broker goes
// DEAD at once; the FLID's next accepted state replaces the row and goes out (R-OUTBOX-4).
func TestOversizedStateIsDeadUntilTheNextState(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	ctx := t.Context()
	big := schdEvent("BIG", 1, outbox.TypeUpsert)
	big.Payload = bigPayload("BIG")
	f.add(big, schdEvent("OK", 1, outbox.TypeUpsert))
	if n, err := f.d.FlushLatest(ctx, f.s, f.schd); err != nil || n != 1 {
		t.Fatalf("flush: %d sent, %v; want OK's state sent", n, err)
	}
	if n := f.count(outbox.TargetSchd, "DEAD"); n != 1 {
		t.Fatalf("%d DEAD rows, want the oversized state", n)
	}
	if got := metricValue(t, f, "msgx_dispatcher_refused_total", outbox.TargetSchd); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
	f.add(schdEvent("BIG", 2, outbox.TypeUpsert))
	if n, err := f.d.FlushLatest(ctx, f.s, f.schd); err != nil || n != 1 {
		t.Fatalf("flush after the next state: %d sent, %v", n, err)
	}
	if n := f.count(outbox.TargetSchd, "SENT"); n != 2 {
		t.Errorf("%d SENT rows, want both FLIDs' states", n)
	}
}
