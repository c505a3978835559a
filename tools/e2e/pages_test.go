package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/config"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/traffic"
)

// TestLargeFlightIsReadInBytePages reproduces issue #57's second finding through the five
// binaries and the msgxctl binary, at a smaller scale: a flight whose FLOPs each rewrite its 99
// gates (the collection's bound) with 3 KB gate names, about 300 KB (under the KAFKA:schd
// record of the default kafka.max-message-bytes), so that its history is several times
// control.page-bytes. Before the byte bound, one default GetFlightHistory page held all of it
// and msgxctl failed with exit 18 over 4 MiB. Now: every raw page stays under the budget and
// ends with the cursor of the next, msgxctl flight-history and get-message exit 0 with every
// entry, and control's peak RSS stays under 200 MB.
func TestLargeFlightIsReadInBytePages(t *testing.T) {
	const (
		flid  = "E2E-PAGES"
		flops = 6
		gates = 99
	)
	e := newEnv(t)
	e.startAllWith(t)
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	f := traffic.Flight{FLID: flid, ALCD: "CA", FLNO: "CA1777", MVIN: "D", SODT: day.Add(9 * time.Hour),
		FLTY: "W", FLIN: "D", ACFT: "33L", Route: []string{"PEK", "SHA"}}
	dttm := day.Add(6 * time.Hour)
	msgs := []*message{{xml: traffic.ADFT(1, dttm, f), want: "SUCCEEDED"}}
	for n := 1; n <= flops; n++ {
		// Each FLOP renames every gate: the whole collection changes, old and new.
		var body strings.Builder
		for i := 1; i <= gates; i++ {
			fmt.Fprintf(&body, `<GTDT GTNO="%d"><GATE>%s</GATE></GTDT>`, i, strings.Repeat(string(rune('A'+n)), 3000))
		}
		msgs = append(msgs, &message{xml: traffic.FLOP(int64(1+n), dttm.Add(time.Duration(n)*time.Minute), flid, f.FFID(), "GTDT", body.String()),
			want: "SUCCEEDED"})
	}
	e.insert(t, msgs)
	e.waitAll(t, msgs)
	var historyBytes, entries int64
	if err := e.pg.Pool.QueryRow(t.Context(), `SELECT coalesce(sum(length(c::text)), 0), count(DISTINCT msg_id) FROM flight_change c WHERE flid = $1`,
		flid).Scan(&historyBytes, &entries); err != nil {
		t.Fatal(err)
	}
	budget := int64(config.Default().Control.PageBytes)
	if historyBytes < 3*budget {
		t.Fatalf("the history is %d bytes, want several control.page-bytes (%d): the probe proves nothing", historyBytes, budget)
	}

	// The raw pages: each under the budget (with the answer's own framing), each but the last
	// naming the next.
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := controlv1.NewControlServiceClient(conn)
	var after int64
	var pages, got int
	var largest int
	for {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+e.token), time.Minute)
		resp, err := client.GetFlightHistory(ctx, &controlv1.GetFlightHistoryRequest{Flid: flid, AfterMsgId: after, PageSize: 500})
		cancel()
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		got += len(resp.GetEntries())
		largest = max(largest, proto.Size(resp))
		if int64(proto.Size(resp)) > budget+64<<10 {
			t.Errorf("page %d is %d bytes, over control.page-bytes %d", pages, proto.Size(resp), budget)
		}
		if resp.GetNextAfterMsgId() == 0 {
			break
		}
		after = resp.GetNextAfterMsgId()
	}
	if int64(got) != entries || pages < 2 {
		t.Errorf("%d entries over %d pages, want %d entries over several", got, pages, entries)
	}

	// msgxctl follows the pages on its own.
	out, errOut, code := e.msgxctl(t, "flight-history", flid, "--all", "-o", "json")
	if code != 0 {
		t.Fatalf("msgxctl flight-history: exit %d\n%s", code, errOut)
	}
	var listed struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("msgxctl flight-history -o json: %v\n%s", err, clip(out))
	}
	if int64(len(listed.Entries)) != entries {
		t.Errorf("msgxctl flight-history listed %d entries, want %d", len(listed.Entries), entries)
	}
	if _, errOut, code := e.msgxctl(t, "get-message", strconv.FormatInt(msgs[flops].id, 10)); code != 0 {
		t.Errorf("msgxctl get-message of a FLOP: exit %d\n%s", code, errOut)
	}
	peak := peakRSS(t, e.stack.PID("control"))
	t.Logf("history of %d entries, %d bytes (%d FLOPs × %d gates of 3 KB): %d raw pages, the largest %d bytes (control.page-bytes %d); msgxctl flight-history printed %d bytes; control peak RSS %d MiB",
		entries, historyBytes, flops, gates, pages, largest, budget, len(out), peak>>20)
	if peak > 200<<20 {
		t.Errorf("control peak RSS %d MiB, want under 200 MiB", peak>>20)
	}
}
