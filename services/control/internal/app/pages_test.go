package app_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/services/control/internal/ctl"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// A flight whose messages carry documents of 1.5 MB, at a smaller scale the probe of issue #57
// (six ADFTs of 5.97 MB on one flight: one default GetFlightHistory page answered 65.6 MB and
// msgxctl could not read the flight at all, exit 18).
const (
	bigDocs     = 6
	bigDocBytes = 1500 << 10
)

// bigDoc is the collection JSON message i wrote: random hex, so that PostgreSQL's compression
// does not make the stored rows small.
func bigDoc(t *testing.T, i int) string {
	t.Helper()
	b := make([]byte, bigDocBytes/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`[{"seq":"%d","gate":"%s"}]`, i, hex.EncodeToString(b))
}

// bigFlightFixture writes flight BIG's history: bigDocs messages that each changed its GTDT to
// a document of about bigDocBytes (old → new) and wrote a KAFKA:msg event holding it, and
// between them messages that ended SKIPPED without writing. It returns every message ID about
// the flight in order and the documents by the message that wrote them.
func bigFlightFixture(t *testing.T, pg *pgtest.DB) (ids []int64, docs map[int64]string) {
	t.Helper()
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	docs = map[int64]string{}
	prev := ""
	for i := range bigDocs {
		id := int64(1000 + 10*i)
		doc := bigDoc(t, i)
		pg.Exec(t, `INSERT INTO proc_state (msg_id, state, msg_type, msg_styp, enqueued_at, finished_at, backfill_at, updated_at, flid)
			VALUES ($1, 'SUCCEEDED', 'SCHD', 'ADFT', $2, $2, $2, $2, 'BIG')`, id, at)
		changes, err := json.Marshal(map[string]map[string]string{
			"GTDT": {"old": prev, "new": doc},
			"ESTT": {"old": fmt.Sprintf("01MAR26%04d", i), "new": fmt.Sprintf("01MAR26%04d", i+1)},
		})
		if err != nil {
			t.Fatal(err)
		}
		pg.Exec(t, `INSERT INTO flight_change (msg_id, flid, msg_type, styp, cause, state, version, changes, superseded, events, written_at)
			VALUES ($1, 'BIG', 'SCHD', 'ADFT', 'target', 'ACTIVE', $2, $3, '{}', '[{"target":"KAFKA:msg","type":"UPSERT","version":1}]', $4)`,
			id, i+1, string(changes), at)
		pg.Exec(t, `INSERT INTO msg_event (target, partition_key, event_type, state_version, payload, msg_id, state, attempts, sent_at, created_at, updated_at)
			VALUES ('KAFKA:msg', 'BIG', 'UPSERT', $1, $2, $3, 'SENT', 0, $4, $4, $4)`, i+1, `{"GTDT":`+doc+`}`, id, at)
		skipped := id + 5
		pg.Exec(t, `INSERT INTO proc_state (msg_id, state, msg_type, msg_styp, last_error, enqueued_at, finished_at, backfill_at, updated_at, flid)
			VALUES ($1, 'SKIPPED', 'FLOP', 'ESTT', 'superseded', $2, $2, $2, $2, 'BIG')`, skipped, at)
		ids = append(ids, id, skipped)
		docs[id], prev = doc, doc
	}
	return ids, docs
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// checkCut checks that got is value whole, or its head with cut giving its length and digest.
func checkCut(t *testing.T, what, value, got string, cut *controlv1.Truncated, max int) {
	t.Helper()
	if len(value) <= max {
		if got != value || cut != nil {
			t.Errorf("%s: a value of %d bytes must be whole (got %d bytes, cut %v)", what, len(value), len(got), cut)
		}
		return
	}
	if cut == nil || len(got) > max || !strings.HasPrefix(value, got) || cut.GetKeptBytes() != int64(len(got)) ||
		cut.GetBytes() != int64(len(value)) || cut.GetSha256() != sha(value) {
		t.Errorf("%s: a value of %d bytes: got %d bytes (at most %d, its head), cut %v, want length %d and sha256 %s",
			what, len(value), len(got), max, cut, len(value), sha(value))
	}
}

func TestAnswersBoundedInBytes(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ids, docs := bigFlightFixture(t, pg)
	in := startWith(t, pg, "control-pages", time.Now(), nil, nil)
	waitActive(t, in)
	budget := config.Default().Control.PageBytes
	valueMax := budget / 8
	// What one page answered before the bound: every row with its old and new document.
	whole := 0
	for _, d := range docs {
		whole += 2 * len(d)
	}
	t.Logf("the flight's history holds %d messages, %.1f MB of old and new values; control.page-bytes %d", len(ids), float64(whole)/1e6, budget)

	t.Run("GetFlightHistory pages stay under the budget and return every entry once", func(t *testing.T) {
		for _, size := range []int32{0, controlv1.MaxFlightHistoryPage} {
			var got []int64
			after, pages := int64(0), 0
			for {
				resp, err := in.client.GetFlightHistory(withToken(callCtx(t), token),
					&controlv1.GetFlightHistoryRequest{Flid: "BIG", AfterMsgId: after, PageSize: size})
				if err != nil {
					t.Fatalf("page %d after %d: %v", pages+1, after, err)
				}
				pages++
				n := proto.Size(resp)
				t.Logf("page_size %d, page %d: %d entries, %d bytes", size, pages, len(resp.GetEntries()), n)
				if n > budget {
					t.Errorf("page %d is %d bytes, over control.page-bytes %d", pages, n, budget)
				}
				for _, e := range resp.GetEntries() {
					got = append(got, e.GetMsgId())
					for _, c := range e.GetChanges() {
						if c.GetPart() != "GTDT" {
							continue
						}
						prev := ""
						if i := slices.Index(ids, e.GetMsgId()); i >= 2 {
							prev = docs[ids[i-2]]
						}
						checkCut(t, fmt.Sprintf("msg %d old", e.GetMsgId()), prev, c.GetOld(), c.GetOldCut(), valueMax)
						checkCut(t, fmt.Sprintf("msg %d new", e.GetMsgId()), docs[e.GetMsgId()], c.GetNew(), c.GetNewCut(), valueMax)
					}
				}
				if resp.GetNextAfterMsgId() == 0 {
					break
				}
				if resp.GetNextAfterMsgId() <= after || pages > 2*len(ids) {
					t.Fatalf("the cursor does not progress: %d after %d", resp.GetNextAfterMsgId(), after)
				}
				after = resp.GetNextAfterMsgId()
			}
			if !slices.Equal(got, ids) {
				t.Errorf("page_size %d: following the cursor returned %v, want every entry once: %v", size, got, ids)
			}
		}
	})

	t.Run("GetMessage carries its flight change and events within the budget", func(t *testing.T) {
		id := ids[len(ids)-2]
		resp, err := in.client.GetMessage(withToken(callCtx(t), token), &controlv1.GetMessageRequest{MsgId: id})
		if err != nil {
			t.Fatal(err)
		}
		n := proto.Size(resp)
		t.Logf("GetMessage %d: %d bytes (%d flight changes, %d of %d events, truncated %v)", id, n,
			len(resp.GetFlightChanges()), len(resp.GetEvents()), resp.GetEventsTotal(), resp.GetFlightChangesTruncated())
		if n > budget {
			t.Errorf("GetMessage is %d bytes, over control.page-bytes %d (no raw text here: the inbox is not reachable)", n, budget)
		}
		if len(resp.GetFlightChanges()) != 1 || resp.GetEventsTotal() != 1 || len(resp.GetEvents()) != 1 {
			t.Fatalf("want the one flight change and the one event: %v", resp)
		}
		for _, c := range resp.GetFlightChanges()[0].GetChanges() {
			if c.GetPart() == "GTDT" {
				checkCut(t, "new", docs[id], c.GetNew(), c.GetNewCut(), valueMax)
			}
		}
		// The payload as PostgreSQL keeps it (jsonb spells it its own way).
		var payload string
		if err := pg.Pool.QueryRow(t.Context(), `SELECT payload::text FROM msg_event WHERE msg_id = $1`, id).Scan(&payload); err != nil {
			t.Fatal(err)
		}
		ev := resp.GetEvents()[0]
		checkCut(t, "payload", payload, ev.GetPayloadJson(), ev.GetPayloadCut(), valueMax)
	})

	t.Run("GetMessage of a snapshot lists every flight, the changes past the budget omitted", func(t *testing.T) {
		// One message that wrote ten flights, each a new document of 600 KB (a schedule
		// snapshot): 6 MB of changes.
		const snap, flights = int64(5000), 10
		at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
		pg.Exec(t, `INSERT INTO proc_state (msg_id, state, msg_type, msg_styp, enqueued_at, finished_at, backfill_at, updated_at)
			VALUES ($1, 'SUCCEEDED', 'SCHD', 'DNLD', $2, $2, $2, $2)`, snap, at)
		snapDocs := map[string]string{}
		for i := range flights {
			flid := fmt.Sprintf("SNAP%02d", i)
			snapDocs[flid] = bigDoc(t, i)[:600<<10]
			changes, err := json.Marshal(map[string]map[string]string{"GTDT": {"old": "", "new": snapDocs[flid]}})
			if err != nil {
				t.Fatal(err)
			}
			pg.Exec(t, `INSERT INTO flight_change (msg_id, flid, msg_type, styp, cause, state, version, changes, superseded, events, written_at)
				VALUES ($1, $2, 'SCHD', 'DNLD', 'record', 'ACTIVE', 1, $3, '{}', '[]', $4)`, snap, flid, string(changes), at)
		}
		resp, err := in.client.GetMessage(withToken(callCtx(t), token), &controlv1.GetMessageRequest{MsgId: snap})
		if err != nil {
			t.Fatal(err)
		}
		omitted := 0
		for _, e := range resp.GetFlightChanges() {
			if e.GetChangesOmitted() {
				omitted++
				if len(e.GetChanges()) != 0 {
					t.Errorf("%s: changes_omitted with %d changes", e.GetFlid(), len(e.GetChanges()))
				}
				// Where the answer says the changes are.
				h, err := in.client.GetFlightHistory(withToken(callCtx(t), token),
					&controlv1.GetFlightHistoryRequest{Flid: e.GetFlid(), AfterMsgId: snap - 1, PageSize: 1})
				if err != nil || len(h.GetEntries()) != 1 || len(h.GetEntries()[0].GetChanges()) != 1 {
					t.Fatalf("%s: GetFlightHistory after %d: %v %v", e.GetFlid(), snap-1, h, err)
				}
				c := h.GetEntries()[0].GetChanges()[0]
				checkCut(t, e.GetFlid(), snapDocs[e.GetFlid()], c.GetNew(), c.GetNewCut(), valueMax)
				continue
			}
			checkCut(t, e.GetFlid(), snapDocs[e.GetFlid()], e.GetChanges()[0].GetNew(), e.GetChanges()[0].GetNewCut(), valueMax)
		}
		n := proto.Size(resp)
		t.Logf("GetMessage of a message that wrote %d flights of 600 KB: %d bytes, %d flights with their changes, %d omitted", flights, n, flights-omitted, omitted)
		if n > budget || len(resp.GetFlightChanges()) != flights || omitted == 0 || omitted == flights || !resp.GetFlightChangesTruncated() {
			t.Errorf("want every flight listed within %d bytes, some with their changes and the rest omitted, flight_changes_truncated set", budget)
		}
		out, errOut, code := msgxctl(t, msgxctlEnv(t, in), "get-message", fmt.Sprint(snap))
		if code != 0 || !strings.Contains(out, "flight changes or events are truncated") ||
			!strings.Contains(out, fmt.Sprintf("--after-msg-id %d --page-size 1", snap-1)) {
			t.Errorf("msgxctl get-message %d: exit %d: %s\n%s", snap, code, errOut, out)
		}
	})

	t.Run("GetFlight's events within the budget", func(t *testing.T) {
		resp, err := in.client.GetFlight(withToken(callCtx(t), token), &controlv1.GetFlightRequest{Flid: "BIG"})
		if err != nil {
			t.Fatal(err)
		}
		n := proto.Size(resp)
		t.Logf("GetFlight: %d bytes, %d events", n, len(resp.GetEvents()))
		if n > budget || len(resp.GetEvents()) == 0 {
			t.Errorf("GetFlight is %d bytes with %d events, want at most %d and one event at least", n, len(resp.GetEvents()), budget)
		}
	})

	t.Run("msgxctl reads the whole flight, page after page", func(t *testing.T) {
		env := msgxctlEnv(t, in)
		out, errOut, code := msgxctl(t, env, "flight-history", "BIG")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		t.Logf("msgxctl flight-history BIG: %d bytes of output", len(out))
		for _, id := range ids {
			if !regexp.MustCompile(fmt.Sprintf(`(?m)^msg %d `, id)).MatchString(out) {
				t.Errorf("msg %d missing from the output", id)
			}
		}
		last := ids[len(ids)-2]
		if want := fmt.Sprintf("[cut: %d of %d bytes shown, sha256 %s]", valueMax, len(docs[last]), sha(docs[last])); !strings.Contains(out, want) {
			t.Errorf("the cut of msg %d's GTDT is not shown as %q", last, want)
		}
		if strings.Contains(out, "more:") {
			t.Errorf("the flight's %d entries are fewer than a page: nothing more to ask for\n%s", len(ids), out[len(out)-300:])
		}
		if _, errOut, code := msgxctl(t, env, "get-message", fmt.Sprint(last)); code != 0 {
			t.Errorf("get-message %d: exit %d: %s", last, code, errOut)
		}
	})

	t.Run("job lists leave the FLIDs out, the job's own answer has them", func(t *testing.T) {
		// Three republishes of 10,000 FLIDs of 90 bytes, the probe's (ten of them answered 9.2 MB).
		flids := make([]string, jobsFLIDs)
		for i := range flids {
			flids[i] = fmt.Sprintf("F%089d", i)
		}
		var jobIDs []int64
		for range 3 {
			r, err := in.client.Republish(withToken(callCtx(t), token), &controlv1.RepublishRequest{Flid: flids, Comment: "issue 57"})
			if err != nil {
				t.Fatal(err)
			}
			id := r.GetRepublish().GetRepublishId()
			if _, err := in.client.CancelRepublish(withToken(callCtx(t), token), &controlv1.CancelRepublishRequest{Comment: "INC-T", RepublishId: id}); err != nil {
				t.Fatal(err)
			}
			jobIDs = append(jobIDs, id)
		}
		list, err := in.client.ListRepublishes(withToken(callCtx(t), token), &controlv1.ListRepublishesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ListRepublishes of %d jobs of %d FLIDs: %d bytes", len(list.GetRepublishes()), jobsFLIDs, proto.Size(list))
		if len(list.GetRepublishes()) != 3 || proto.Size(list) > 4<<10 {
			t.Errorf("want the 3 republishes in a few hundred bytes, got %d in %d bytes", len(list.GetRepublishes()), proto.Size(list))
		}
		for _, r := range list.GetRepublishes() {
			if len(r.GetFlid()) != 0 || r.GetFlidCount() != jobsFLIDs || r.GetAll() {
				t.Errorf("republish %d: %d FLIDs listed, flid_count %d, all %v; want none listed, %d counted, not all",
					r.GetRepublishId(), len(r.GetFlid()), r.GetFlidCount(), r.GetAll(), jobsFLIDs)
			}
		}
		one, err := in.client.GetRepublish(withToken(callCtx(t), token), &controlv1.GetRepublishRequest{RepublishId: jobIDs[0]})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("GetRepublish: %d bytes", proto.Size(one))
		if !slices.Equal(one.GetRepublish().GetFlid(), flids) || one.GetRepublish().GetFlidCount() != jobsFLIDs {
			t.Errorf("GetRepublish: %d FLIDs, flid_count %d; want all %d", len(one.GetRepublish().GetFlid()), one.GetRepublish().GetFlidCount(), jobsFLIDs)
		}
		if _, errOut, code := msgxctl(t, msgxctlEnv(t, in), "list-republishes"); code != 0 {
			t.Errorf("list-republishes: exit %d: %s", code, errOut)
		}
	})
}

// jobsFLIDs is the scope of the republishes TestAnswersBoundedInBytes lists: the most one job
// takes.
const jobsFLIDs = 10000

// msgxctlEnv is the environment that points msgxctl at in with the operator token.
func msgxctlEnv(t *testing.T, in *instance) []string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{ctl.EnvAddr + "=" + in.addr, ctl.EnvTokenFile + "=" + tokenFile}
}

// TestListPagesStopAtTheBudget: a list whose rows are small still stops at control.page-bytes
// (here its least, 64 KiB) before page_size, hands back its cursor, and following it (msgxctl
// does on its own) returns every row once.
func TestListPagesStopAtTheBudget(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	const rows = 1500
	pg.Exec(t, `INSERT INTO proc_state (msg_id, state, msg_type, msg_styp, last_error, enqueued_at, finished_at, backfill_at, updated_at, flid)
		SELECT i, 'SKIPPED', 'FLOP', 'ESTT', repeat('x', 100), now(), now(), now(), now(), 'F' || i FROM generate_series(1, $1) i`, rows)
	in := startWith(t, pg, "control-small-pages", time.Now(), func(c *config.Config) { c.Control.PageBytes = config.MinControlPageBytes }, nil)
	waitActive(t, in)
	var got []int64
	tok, pages := "", 0
	for {
		resp, err := in.client.ListMessages(withToken(callCtx(t), token), &controlv1.ListMessagesRequest{PageSize: controlv1.MaxPageSize, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		t.Logf("page %d: %d messages, %d bytes", pages, len(resp.GetMessages()), proto.Size(resp))
		if n := proto.Size(resp); n > config.MinControlPageBytes {
			t.Errorf("page %d is %d bytes, over %d", pages, n, config.MinControlPageBytes)
		}
		for _, m := range resp.GetMessages() {
			got = append(got, m.GetMsgId())
		}
		if tok = resp.GetNextPageToken(); tok == "" {
			break
		}
		if pages > rows {
			t.Fatal("the pages do not end")
		}
	}
	want := make([]int64, rows)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if pages < 3 || !slices.Equal(got, want) {
		t.Errorf("%d pages returned %d messages, want every one of %d once over several pages", pages, len(got), rows)
	}
	out, errOut, code := msgxctl(t, msgxctlEnv(t, in), "list-messages", "--page-size", fmt.Sprint(controlv1.MaxPageSize), "-o", "json")
	if code != 0 {
		t.Fatalf("list-messages: exit %d: %s", code, errOut)
	}
	var listed controlv1.ListMessagesResponse
	if err := protojson.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.GetMessages()) != controlv1.MaxPageSize || listed.GetNextPageToken() == "" {
		t.Errorf("msgxctl list-messages --page-size %d: %d messages, next %q; want the %d asked for, gathered over the byte-bounded pages, and a next page",
			controlv1.MaxPageSize, len(listed.GetMessages()), listed.GetNextPageToken(), controlv1.MaxPageSize)
	}
}
