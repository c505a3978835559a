package delivery_test

import (
	"encoding/json"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/services/dispatcher/internal/delivery"
)

// TestSchdAggregation: several accepted states of one FLID within a period leave one row, and
// the flush sends one record with the latest state; a TOMBSTONE goes out as a null value.
func TestSchdAggregation(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	ctx := t.Context()
	for v := int64(1); v <= 4; v++ {
		f.add(schdEvent("F1", v, outbox.TypeUpsert))
	}
	f.add(schdEvent("F1", 2, outbox.TypeUpsert)) // late and older: must not win
	f.add(schdEvent("F2", 1, outbox.TypeUpsert), schdEvent("F2", 2, outbox.TypeTombstone))

	n, err := f.d.FlushLatest(ctx, f.s, f.schd)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("flushed %d rows, want 2", n)
	}
	got := consume(t, f.broker.addrs, f.broker.topicSchd, 2)
	byKey := map[string]consumed{}
	for _, c := range got {
		if _, dup := byKey[c.Key]; dup {
			t.Fatalf("two records for %s", c.Key)
		}
		byKey[c.Key] = c
	}
	var body struct {
		V int64 `json:"STATE_VERSION"`
	}
	if err := json.Unmarshal(byKey["F1"].Value, &body); err != nil || body.V != 4 || byKey["F1"].Version != 4 {
		t.Errorf("F1 record = %q (version header %d), want the state of version 4", byKey["F1"].Value, byKey["F1"].Version)
	}
	if c := byKey["F2"]; c.Value != nil || c.Type != outbox.TypeTombstone || c.Version != 2 {
		t.Errorf("F2 record = %q type %s version %d, want a null-value TOMBSTONE of version 2", c.Value, c.Type, c.Version)
	}
	for _, r := range f.rows(outbox.TargetSchd) {
		if r.State != "SENT" || r.SentAt == nil {
			t.Errorf("schd row %s is %s", r.FLID, r.State)
		}
	}
	// Nothing left: the next flush sends nothing.
	if n, err := f.d.FlushLatest(ctx, f.s, f.schd); err != nil || n != 0 {
		t.Fatalf("second flush sent %d (%v), want 0", n, err)
	}
}

// TestSchdConditionalMark: the pump replaces a row while its previous state is on the wire.
// The acknowledged older state must not mark the newer one: it stays PENDING and goes out in
// the next round.
// Guards R-INV-14.
func TestSchdConditionalMark(t *testing.T) {
	t.Parallel()
	var f *fixture
	replaced := false
	f = setup(t, options{wrap: func(s delivery.Sink) delivery.Sink {
		return &hook{Sink: s, after: func(out []delivery.Outgoing, errs []error) []error {
			if out[0].Event.Target == outbox.TargetSchd && !replaced {
				replaced = true
				f.add(schdEvent("F1", 2, outbox.TypeUpsert))
			}
			return errs
		}}
	}})
	ctx := t.Context()
	f.add(schdEvent("F1", 1, outbox.TypeUpsert))
	if n, err := f.d.FlushLatest(ctx, f.s, f.schd); err != nil || n != 0 {
		t.Fatalf("first flush marked %d (%v), want 0: the row was replaced during the send", n, err)
	}
	rows := f.rows(outbox.TargetSchd)
	if len(rows) != 1 || rows[0].State != "PENDING" || rows[0].Version != 2 || rows[0].Attempts != 0 {
		t.Fatalf("after the race: %+v, want one PENDING row of version 2", rows)
	}
	if n, err := f.d.FlushLatest(ctx, f.s, f.schd); err != nil || n != 1 {
		t.Fatalf("second flush marked %d (%v), want 1", n, err)
	}
	got := consume(t, f.broker.addrs, f.broker.topicSchd, 2)
	if got[0].Version != 1 || got[1].Version != 2 {
		t.Fatalf("records carry versions %d, %d; want 1 then 2", got[0].Version, got[1].Version)
	}
	if rows := f.rows(outbox.TargetSchd); rows[0].State != "SENT" || rows[0].Version != 2 {
		t.Fatalf("row after the second flush: %+v", rows[0])
	}
}
