package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/testwait"
)

// TestAcknowledgeDeadThroughTheBinaries: a malformed row goes DEAD and the pump's DEAD gauge
// (what MsgxMessagesDead watches) shows it; a reader may not acknowledge it; msgxctl
// acknowledge-dead as the operator does, the gauge falls to 0 and the acknowledged gauge shows
// 1, the row is still listed (with who and why, and under the acknowledged filter), its
// timeline shows the acknowledgement, the call is in the audit log, and a replay still refuses
// the MALFORMED row.
func TestAcknowledgeDeadThroughTheBinaries(t *testing.T) {
	e := newEnv(t)
	pumpAdmin := freePort(t)
	for _, r := range []string{"ingest", "dispatcher", "backfill"} {
		e.start(t, r)
	}
	if err := e.stack.Start("pump", nil, "MSGX_ADMIN_ADDR="+pumpAdmin); err != nil {
		t.Fatal(err)
	}
	if err := e.stack.Start("control", nil, "MSGX_CONTROL_READER_TOKEN="+readerToken); err != nil {
		t.Fatal(err)
	}
	e.waitAllRolesActive(t)

	bad := &message{xml: "<MSG><META><SNDR>AODB</SNDR>this is not SIS"}
	e.insert(t, []*message{bad})
	testwait.ForState(t, 60*time.Second, "the malformed row to be DEAD", func() (bool, string) {
		f := e.facts(t, bad.id)
		return f.state == "DEAD", f.String()
	})
	dead := func() float64 {
		return labelled(t, pumpAdmin, "msgx_pipeline_messages_dead", `error_class="MALFORMED"`)
	}
	acked := func() float64 {
		return labelled(t, pumpAdmin, "msgx_pipeline_messages_dead_acknowledged", `error_class="MALFORMED"`)
	}
	// The pump refreshes its backlog gauges every 15 s.
	testwait.ForState(t, 45*time.Second, "the DEAD gauge to show the row", func() (bool, string) {
		return dead() == 1, fmt.Sprintf("msgx_pipeline_messages_dead{MALFORMED} %v", dead())
	})

	client := controlv1.NewControlServiceClient(e.grpcConn(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const reason = "garbage from the AODB test sender, reviewed with the AODB team"
	_, err := client.AcknowledgeDead(withToken(ctx, readerToken), &controlv1.AcknowledgeDeadRequest{MsgIds: []int64{bad.id}, Reason: reason})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reader AcknowledgeDead: %v, want PERMISSION_DENIED", err)
	}

	out, errOut, code := e.msgxctl(t, "acknowledge-dead", "--msg-ids", fmt.Sprint(bad.id), "--reason", reason, "-o", "json")
	if code != 0 {
		t.Fatalf("acknowledge-dead: exit %d\n%s%s", code, out, errOut)
	}
	var ack struct {
		Acknowledged int64   `json:"acknowledged"`
		IDs          []int64 `json:"acknowledgedIds"`
	}
	if err := json.Unmarshal([]byte(out), &ack); err != nil || ack.Acknowledged != 1 || len(ack.IDs) != 1 || ack.IDs[0] != bad.id {
		t.Fatalf("acknowledge-dead answered %s (%v)", out, err)
	}
	table, _, code := e.msgxctl(t, "acknowledge-dead", "--msg-ids", fmt.Sprint(bad.id), "--reason", "twice")
	if code != 0 || !strings.Contains(table, "already_acknowledged_ids") {
		t.Errorf("a second acknowledgement: exit %d\n%s", code, table)
	}
	t.Logf("msgxctl acknowledge-dead, again:\n%s", table)

	testwait.ForState(t, 45*time.Second, "the DEAD gauge to fall to 0", func() (bool, string) {
		return dead() == 0 && acked() == 1, fmt.Sprintf("dead %v, acknowledged %v", dead(), acked())
	})

	list, err := client.ListMessages(withToken(ctx, readerToken), &controlv1.ListMessagesRequest{
		States: []controlv1.MessageState{controlv1.MessageState_MESSAGE_STATE_DEAD}, Acknowledged: controlv1.AckFilter_ACK_FILTER_ACKNOWLEDGED})
	if err != nil || len(list.GetMessages()) != 1 {
		t.Fatalf("acknowledged DEAD messages: %v, %v", list, err)
	}
	m := list.GetMessages()[0]
	if m.GetMsgId() != bad.id || m.GetAcknowledgedReason() != reason || m.GetAcknowledgedBy() == "" || m.AcknowledgedAt == nil {
		t.Errorf("listed row: %v", m)
	}
	if none, err := client.ListMessages(withToken(ctx, readerToken), &controlv1.ListMessagesRequest{
		States: []controlv1.MessageState{controlv1.MessageState_MESSAGE_STATE_DEAD}, Acknowledged: controlv1.AckFilter_ACK_FILTER_UNACKNOWLEDGED}); err != nil || len(none.GetMessages()) != 0 {
		t.Errorf("unacknowledged DEAD messages: %v, %v", none, err)
	}
	// The reason is long text: in -o wide (the default table names who acknowledged).
	shown, _, code := e.msgxctl(t, "list-messages", "--states", "dead", "--acknowledged", "acknowledged", "-o", "wide")
	if code != 0 || !strings.Contains(shown, reason) {
		t.Errorf("msgxctl list-messages does not show the acknowledgement: exit %d\n%s", code, shown)
	}
	got, err := client.GetMessage(withToken(ctx, readerToken), &controlv1.GetMessageRequest{MsgId: bad.id})
	if err != nil {
		t.Fatal(err)
	}
	var step *controlv1.TimelineStep
	for _, s := range got.GetTimeline() {
		if s.GetStep() == "acknowledged" {
			step = s
		}
	}
	if step == nil || step.At == nil || !strings.Contains(step.GetDetail(), reason) {
		t.Errorf("timeline without the acknowledgement: %v", got.GetTimeline())
	}

	testwait.ForState(t, 5*time.Second, "the audit line of AcknowledgeDead", func() (bool, string) {
		for _, line := range strings.Split(e.stack.Output("control"), "\n") {
			if strings.Contains(line, `"audit":true`) && strings.Contains(line, "AcknowledgeDead") &&
				strings.Contains(line, reason) && strings.Contains(line, `"role":"operator"`) && strings.Contains(line, `"code":"OK"`) {
				return true, ""
			}
		}
		return false, "no audit line of the operator's AcknowledgeDead"
	})

	rep, err := client.Replay(withToken(ctx, e.token), &controlv1.ReplayRequest{MsgIds: []int64{bad.id}, Comment: "e2e"})
	if err != nil || rep.GetReplayed() != 0 || rep.GetIgnoredMalformed() != 1 {
		t.Errorf("replay of the acknowledged MALFORMED row: %v, %v; want it refused", rep, err)
	}
}
