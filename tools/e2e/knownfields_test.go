package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/projection"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// TestNoStateThatCannotBeStoredOrPublished reproduces issue #57's third finding and the
// document half of its second through the five binaries, at a small scale:
//   - a FLOP GTDT of 40 items × 50 distinct unknown tags: the flight's history row, its
//     KAFKA:schd record, its Redis document and its detail rows hold the known fields only,
//     GetFlight reports no drift after the apply, and the pump's log names the ignored tags,
//     bounded;
//   - with kafka.max-message-bytes at 8 KiB, a FLOP GTDT of 99 items with every known field,
//     whose document would be over it, ends DEAD(MALFORMED) with both sizes in its reason, is
//     marked, and changes nothing: the flight keeps its version, its history, its record and its
//     projection.
func TestNoStateThatCannotBeStoredOrPublished(t *testing.T) {
	const limit = 8192
	e := newEnv(t)
	e.startAllWith(t, "MSGX_KAFKA_MAX_MESSAGE_BYTES="+strconv.Itoa(limit))
	const flid = "E2E-KNOWN"
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	f := traffic.Flight{FLID: flid, ALCD: "CA", FLNO: "CA1557", MVIN: "D", SODT: day.Add(9 * time.Hour),
		FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
	dttm := day.Add(6 * time.Hour)

	var probe strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&probe, `<GTDT GTNO="%d"><GATE>G%d</GATE>`, i, i)
		for k := range 50 {
			fmt.Fprintf(&probe, "<QX%03d>unknown value %d</QX%03d>", k, k, k)
		}
		probe.WriteString("</GTDT>")
	}
	var full strings.Builder
	at := traffic.FormatTime(f.SODT)
	for i := 1; i <= 99; i++ {
		fmt.Fprintf(&full, `<GTDT GTNO="%d"><GATE>G%d</GATE><PGOT>%s</PGOT><PGCT>%s</PGCT><GOTM>%s</GOTM><GCTM>%s</GCTM><GTYP>M</GTYP></GTDT>`,
			i, i, at, at, at, at)
	}
	adft := &message{xml: traffic.ADFT(1, dttm, f), want: "SUCCEEDED"}
	unknown := &message{xml: traffic.FLOP(2, dttm.Add(time.Minute), flid, f.FFID(), "GTDT", probe.String()), want: "SUCCEEDED"}
	over := &message{xml: traffic.FLOP(3, dttm.Add(2*time.Minute), flid, f.FFID(), "GTDT", full.String()), want: "DEAD"}
	msgs := []*message{adft, unknown, over}
	e.insert(t, msgs)
	e.waitAll(t, msgs)
	t.Logf("the probe FLOP is %d bytes (40 gates × 50 unknown tags); the refused one %d bytes", len(unknown.xml), len(over.xml))

	// The probe: every store holds the known fields only.
	var payloadBytes, details int
	var historyRow string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT c::text FROM flight_change c WHERE msg_id = $1 AND flid = $2`,
		unknown.id, flid).Scan(&historyRow); err != nil {
		t.Fatal(err)
	}
	historyBytes := len(historyRow)
	var eventID int64
	var payload string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT event_id, payload::text FROM msg_event WHERE msg_id = $1 AND target = 'KAFKA:schd'`,
		unknown.id).Scan(&eventID, &payload); err != nil {
		t.Fatal(err)
	}
	payloadBytes = len(payload)
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM flight_gtdt WHERE flid = $1 AND gate IS NOT NULL`, flid).Scan(&details); err != nil {
		t.Fatal(err)
	}
	record := e.records.record(eventID)
	redisDoc, err := e.redis.Client.Get(t.Context(), projection.FlightKey(e.redis.Prefix, flid)).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the probe: history row %d bytes, KAFKA:schd payload %d bytes, Kafka record value %d bytes, Redis document %d bytes, %d gate rows",
		historyBytes, payloadBytes, len(record.Value), len(redisDoc), details)
	for what, doc := range map[string]string{"history row": historyRow, "KAFKA:schd payload": payload, "Kafka record": string(record.Value), "Redis document": redisDoc} {
		if strings.Contains(doc, "QX0") {
			t.Errorf("the %s carries unknown tags: %.300s", what, doc)
		}
	}
	if string(record.Value) != payload {
		t.Errorf("the Kafka record (%d bytes) is not the outbox payload (%d bytes)", len(record.Value), payloadBytes)
	}
	// 40 gates of a name each: a few KB, against the 100 KB the unknown tags would make.
	if historyBytes > 6000 || payloadBytes > 6000 || len(redisDoc) > 6000 || details != 40 {
		t.Errorf("sizes of the known fields only expected: history %d, payload %d, Redis %d bytes, %d gate rows (want 40)",
			historyBytes, payloadBytes, len(redisDoc), details)
	}
	if log := e.stack.Output("pump"); !strings.Contains(log, "GTDT/QX000") || !strings.Contains(log, "more") {
		t.Errorf("the pump's log does not report the ignored item fields, bounded")
	}

	client, ctx := e.control(t)
	got, err := client.GetFlight(ctx, &controlv1.GetFlightRequest{Flid: flid})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetDrift() != "" || got.GetDrifted() || got.GetPostgres().GetDocumentJson() != got.GetRedis().GetDocumentJson() {
		t.Errorf("GetFlight after a clean apply: drift %q drifted %v\n postgres %s\n redis    %s", got.GetDrift(), got.GetDrifted(),
			got.GetPostgres().GetDocumentJson(), got.GetRedis().GetDocumentJson())
	}
	version := got.GetPostgres().GetVersion()
	history, err := client.GetFlightHistory(ctx, &controlv1.GetFlightHistoryRequest{Flid: flid})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GetFlightHistory answer: %d bytes for %d entries", proto.Size(history), len(history.GetEntries()))

	// The message over the limit: refused with both sizes, nothing changed.
	var reason string
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(error_class, '') || ' ' || coalesce(last_error, '') FROM proc_state WHERE msg_id = $1`,
		over.id).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	t.Logf("refused: %s", reason)
	if !strings.HasPrefix(reason, "MALFORMED over the codec's limits: the KAFKA:schd document of flight "+flid+" would be ") ||
		!strings.Contains(reason, "over the "+strconv.Itoa(limit)+" of kafka.max-message-bytes") {
		t.Errorf("reason %q: want MALFORMED with the document's size and the limit", reason)
	}
	if n := e.facts(t, over.id).events; n != 0 {
		t.Errorf("the refused message wrote %d events", n)
	}
	after, err := client.GetFlight(ctx, &controlv1.GetFlightRequest{Flid: flid})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetPostgres().GetVersion() != version || after.GetRedis().GetDocumentJson() != got.GetRedis().GetDocumentJson() || after.GetDrifted() {
		t.Errorf("the refused message changed the flight: version %d → %d, drifted %v", version, after.GetPostgres().GetVersion(), after.GetDrifted())
	}
	again, err := client.GetFlightHistory(ctx, &controlv1.GetFlightHistoryRequest{Flid: flid})
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range again.GetEntries() {
		if entry.GetMsgId() == over.id && entry.GetVersion() != 0 {
			t.Errorf("history entry of the refused message %v: want no change", entry)
		}
	}
}
