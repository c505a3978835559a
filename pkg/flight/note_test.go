package flight_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flight"
)

// The KAFKA:msg notification keeps the bytes it had when it was written as a map, which
// encoding/json writes with sorted keys: consumers, the outbox's stored payloads and the
// chaos differential compare them. A field added out of name order, a renamed key or a
// changed omission fails here.
func TestNotificationBytes(t *testing.T) {
	at := time.Date(2026, 12, 5, 8, 30, 1, 123456789, time.UTC)
	prev := flight.New("F1")
	prev.Version, prev.State = 3, flight.Active
	prev.Scalars["ESTT"] = "202612050900"
	changed := prev.Clone()
	changed.Version, changed.UpdatedAt = 4, at
	changed.Scalars["ESTT"] = "202612050930"
	changed.Scalars["REMC"] = `<"&">`
	same := prev.Clone()
	same.Version, same.UpdatedAt = 4, at
	gone := prev.Clone()
	gone.Version, gone.UpdatedAt, gone.State = 5, at, flight.Deleted
	in := flight.Input{MsgID: 77, STYP: "ETDT", Now: at}
	for _, c := range []struct {
		name       string
		prev, next flight.Flight
		via        string
	}{
		{"upsert", prev, changed, ""},
		{"upsert through a child", prev, changed, "C9"},
		{"upsert without a published change", prev, same, ""},
		{"tombstone", prev, gone, ""},
		{"tombstone through a master", prev, gone, "M1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := map[string]any{
				"FLID": c.next.FLID, "STATE": c.next.State, "STATE_VERSION": c.next.Version, "MSG_ID": in.MsgID,
				"STYP": in.STYP, "UPDATED_AT": c.next.UpdatedAt.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano),
			}
			if c.via != "" {
				want["VIA"] = c.via
			}
			if c.next.State != flight.Deleted {
				want["CHANGED"] = flight.Changed(c.prev, c.next)
			}
			b, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got := flight.Events(c.prev, c.next, in, c.via)[0].Payload
			if string(got) != string(b) {
				t.Errorf("notification\n got %s\nwant %s", got, b)
			}
		})
	}
}
