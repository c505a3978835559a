package app_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
	"github.com/msgexchange/msgexchange/testkit/mysqltest"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
	"github.com/msgexchange/msgexchange/testkit/testlog"
)

// audits returns the audit lines (audit=true) logs holds so far.
func audits(logs *testlog.Buffer) []map[string]any {
	var out []map[string]any
	for _, line := range logs.Lines() {
		if line["audit"] == true {
			out = append(out, line)
		}
	}
	return out
}

// procRow inserts one proc_state row in a consistent state (terminal rows have finished_at).
func procRow(t *testing.T, db *pgtest.DB, id int64, state, class string, enqueued time.Time) {
	t.Helper()
	var finished *time.Time
	if state == "SUCCEEDED" || state == "SKIPPED" || state == "DEAD" {
		f := enqueued.Add(time.Minute)
		finished = &f
	}
	attempts := 0
	if class == "EXHAUSTED" {
		attempts = 5
	}
	db.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, last_error, attempts, enqueued_at, finished_at,
		backfill_next_at, updated_at)
		VALUES ($1, $2, nullif($3, ''), nullif($3, ''), $4, $5, $6, $6, $5)`, id, state, class, attempts, enqueued, finished)
}

func stateOf(t *testing.T, db *pgtest.DB, id int64) (state string, attempts int) {
	t.Helper()
	if err := db.Pool.QueryRow(t.Context(), `SELECT state, attempts FROM proc_state WHERE msg_id = $1`, id).Scan(&state, &attempts); err != nil {
		t.Fatalf("state of %d: %v", id, err)
	}
	return state, attempts
}

func TestReplay(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	procRow(t, db, 1, "DEAD", "EXHAUSTED", now.Add(-time.Hour))
	procRow(t, db, 2, "DEAD", "MALFORMED", now.Add(-time.Hour))
	procRow(t, db, 3, "FAILED", "INFRA", now.Add(-time.Hour))
	procRow(t, db, 4, "SUCCEEDED", "", now.Add(-time.Hour))
	procRow(t, db, 5, "DEAD", "PROTOCOL", now.Add(-time.Hour))
	procRow(t, db, 6, "DEAD", "EXHAUSTED", now.Add(-time.Hour))
	logs := &testlog.Buffer{}
	in := startWith(t, db, "control-replay", now, nil, logs)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)

	t.Run("dry run changes nothing", func(t *testing.T) {
		resp, err := in.client.Replay(ctx, &controlv1.ReplayRequest{MsgIds: []int64{1, 2, 3, 4, 5, 99}, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.GetDryRun() || resp.GetReplayed() != 2 || !slices.Equal(resp.GetReplayedIds(), []int64{1, 3}) ||
			resp.GetIgnoredMalformed() != 1 || !slices.Equal(resp.GetMalformedIds(), []int64{2}) ||
			!slices.Equal(resp.GetNotReplayableIds(), []int64{4, 5, 99}) {
			t.Errorf("dry run = %v, want replayed [1 3], malformed [2], not replayable [4 5 99]", resp)
		}
		if st, _ := stateOf(t, db, 1); st != "DEAD" {
			t.Errorf("after a dry run message 1 is %s, want DEAD", st)
		}
	})
	t.Run("by IDs", func(t *testing.T) {
		resp, err := in.client.Replay(ctx, &controlv1.ReplayRequest{MsgIds: []int64{1, 2, 3}, Comment: "INC-42"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetDryRun() || !slices.Equal(resp.GetReplayedIds(), []int64{1, 3}) || !slices.Equal(resp.GetMalformedIds(), []int64{2}) ||
			len(resp.GetNotReplayableIds()) != 0 {
			t.Errorf("replay = %v, want [1 3] replayed and 2 ignored as MALFORMED", resp)
		}
		for id, want := range map[int64]string{1: "PENDING", 2: "DEAD", 3: "PENDING"} {
			if st, attempts := stateOf(t, db, id); st != want || (want == "PENDING" && attempts != 0) {
				t.Errorf("message %d is %s with %d attempts, want %s", id, st, attempts, want)
			}
		}
	})
	t.Run("by class", func(t *testing.T) {
		resp, err := in.client.Replay(ctx, &controlv1.ReplayRequest{Comment: "INC-T", ErrorClass: controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(resp.GetReplayedIds(), []int64{6}) {
			t.Errorf("replay EXHAUSTED = %v, want [6]", resp.GetReplayedIds())
		}
	})
	t.Run("by range", func(t *testing.T) {
		procRow(t, db, 20, "FAILED", "CODEC_ERROR", now)
		procRow(t, db, 21, "DEAD", "MALFORMED", now)
		procRow(t, db, 30, "FAILED", "CODEC_ERROR", now)
		resp, err := in.client.Replay(ctx, &controlv1.ReplayRequest{Comment: "INC-T", Range: &controlv1.IdRange{First: 20, Last: 29}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(resp.GetReplayedIds(), []int64{20}) || !slices.Equal(resp.GetMalformedIds(), []int64{21}) {
			t.Errorf("replay 20-29 = %v, want 20 replayed, 21 MALFORMED", resp)
		}
		if st, _ := stateOf(t, db, 30); st != "FAILED" {
			t.Errorf("message 30 outside the range is %s, want FAILED", st)
		}
	})
	t.Run("invalid requests", func(t *testing.T) {
		for name, req := range map[string]*controlv1.ReplayRequest{
			"no selector":   {DryRun: true},
			"MALFORMED":     {ErrorClass: controlv1.ErrorClass_ERROR_CLASS_MALFORMED},
			"empty range":   {Range: &controlv1.IdRange{First: 5, Last: 4}},
			"negative ID":   {MsgIds: []int64{-1}},
			"unknown class": {ErrorClass: 99},
		} {
			if _, err := in.client.Replay(ctx, req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%s: Replay = %v, want InvalidArgument", name, err)
			}
		}
	})
	t.Run("audited", func(t *testing.T) {
		var found bool
		for _, a := range audits(logs) {
			if a["method"] != "/msgx.control.v1.ControlService/Replay" || !strings.Contains(a["request"].(string), "INC-42") {
				continue
			}
			found = true
			caller, _ := a["caller"].(map[string]any)
			if tok, _ := caller["token"].(string); tok != "operator-token" || strings.Contains(tok, token) {
				t.Errorf("audit caller token = %q, want operator-token", tok)
			}
			// protojson's spacing is deliberately unstable: compare the decoded response.
			var resp struct {
				ReplayedIDs []string `json:"replayed_ids"`
			}
			_ = json.Unmarshal([]byte(a["response"].(string)), &resp)
			if caller["peer"] == "" || a["code"] != "OK" || !slices.Equal(resp.ReplayedIDs, []string{"1", "3"}) {
				t.Errorf("audit line = %v, want the peer, code OK and the replayed IDs", a)
			}
			if a["level"] != "INFO" {
				t.Errorf("audit level = %v, want INFO", a["level"])
			}
		}
		if !found {
			t.Fatalf("no audit line for the replay with comment INC-42 in %v", audits(logs))
		}
		invalid := 0
		for _, a := range audits(logs) {
			if a["code"] == "InvalidArgument" {
				invalid++
			}
		}
		if invalid != 5 {
			t.Errorf("audited %d refused invalid replays, want 5", invalid)
		}
	})
	t.Run("reads are not audited", func(t *testing.T) {
		before := len(audits(logs))
		if _, err := in.client.GetStatus(ctx, &controlv1.GetStatusRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := in.client.ListMessages(ctx, &controlv1.ListMessagesRequest{}); err != nil {
			t.Fatal(err)
		}
		if after := len(audits(logs)); after != before {
			t.Errorf("reads added %d audit lines, want none", after-before)
		}
	})
}

func TestReopen(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	abandon := func(id int64, reason string) {
		procRow(t, db, id, "SUCCEEDED", "", now.Add(-time.Hour))
		db.Exec(t, `UPDATE proc_state SET backfill_abandoned_at = $2, backfill_abandon_reason = $3, backfill_next_at = NULL,
			backfill_attempts = 3 WHERE msg_id = $1`, id, now.Add(-time.Minute), reason)
	}
	abandon(10, "MISSING_ROW")
	abandon(11, "TRANSIENT_DEADLINE")
	abandon(12, "MISSING_ROW")
	in := startControl(t, db, "control-reopen", token, false, now)
	waitActive(t, in)
	ctx := withToken(callCtx(t), token)
	abandoned := func(id int64) bool {
		var yes bool
		if err := db.Pool.QueryRow(t.Context(), `SELECT backfill_abandoned_at IS NOT NULL FROM proc_state WHERE msg_id = $1`, id).Scan(&yes); err != nil {
			t.Fatal(err)
		}
		return yes
	}

	resp, err := in.client.Reopen(ctx, &controlv1.ReopenRequest{Reason: controlv1.AbandonReason_ABANDON_REASON_MISSING_ROW, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.GetReopenedIds(), []int64{10, 12}) || !resp.GetDryRun() || !abandoned(10) {
		t.Errorf("dry run = %v (10 still abandoned: %v), want [10 12] and nothing changed", resp, abandoned(10))
	}
	resp, err = in.client.Reopen(ctx, &controlv1.ReopenRequest{Comment: "INC-T", MsgIds: []int64{11, 12, 99}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReopened() != 2 || !slices.Equal(resp.GetReopenedIds(), []int64{11, 12}) || abandoned(11) || abandoned(12) || !abandoned(10) {
		t.Errorf("reopen [11 12 99] = %v; abandoned now 10:%v 11:%v 12:%v", resp, abandoned(10), abandoned(11), abandoned(12))
	}
	if _, err := in.client.Reopen(ctx, &controlv1.ReopenRequest{DryRun: true}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Reopen without a selector = %v, want InvalidArgument", err)
	}
}

func TestSeedCutover(t *testing.T) {
	t.Parallel()
	my := mysqltest.New(t)
	for range 3 {
		my.InsertInbox(t, "<MSG/>", nil)
	}
	var minID, maxID int64
	if err := my.Admin.QueryRowContext(t.Context(), `SELECT MIN(CMINMSGS_ID), MAX(CMINMSGS_ID) FROM cminmsgs`).Scan(&minID, &maxID); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	withInbox := func(cfg *config.Config) { cfg.MySQL.DSN = my.ServiceDSN }

	cases := []struct {
		mode  controlv1.SeedMode
		w     int64
		wantW int64
	}{
		{controlv1.SeedMode_SEED_MODE_MIN, 0, minID - 1},
		{controlv1.SeedMode_SEED_MODE_MAX, 0, maxID},
		{controlv1.SeedMode_SEED_MODE_ZERO, 0, 0},
		{controlv1.SeedMode_SEED_MODE_ID, maxID - 1, maxID - 1},
	}
	for _, tc := range cases {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			in := startWith(t, db, "control-seed", now, withInbox, nil)
			waitActive(t, in)
			ctx := withToken(callCtx(t), token)
			resp, err := in.client.SeedCutover(ctx, &controlv1.SeedCutoverRequest{Mode: tc.mode, Watermark: tc.w, Comment: "cutover plan"})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetWatermark() != tc.wantW || resp.GetMode() != tc.mode || !resp.GetSeededAt().AsTime().Equal(now) {
				t.Errorf("seed = %v, want W=%d at %v", resp, tc.wantW, now)
			}
			st, err := in.client.GetStatus(ctx, &controlv1.GetStatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if d := st.GetDiscovery(); d.GetWatermark() != tc.wantW || d.GetSeededAt() == nil || d.GetInboxMaxId() != maxID ||
				d.GetLag() != max(maxID-tc.wantW, 0) || d.InboxError != "" {
				t.Errorf("status discovery after seeding = %v, want W=%d, inbox max %d, lag %d", d, tc.wantW, maxID, max(maxID-tc.wantW, 0))
			}
			// Refused once seeded, whatever the mode.
			_, err = in.client.SeedCutover(ctx, &controlv1.SeedCutoverRequest{Comment: "INC-T", Mode: controlv1.SeedMode_SEED_MODE_ZERO})
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already seeded") {
				t.Errorf("second seeding = %v, want FailedPrecondition (already seeded)", err)
			}
		})
	}
	t.Run("refused once messages exist", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		procRow(t, db, 1, "PENDING", "", now)
		in := startWith(t, db, "control-seed-used", now, withInbox, nil)
		waitActive(t, in)
		_, err := in.client.SeedCutover(withToken(callCtx(t), token), &controlv1.SeedCutoverRequest{Comment: "INC-T", Mode: controlv1.SeedMode_SEED_MODE_MAX})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("seeding with messages = %v, want FailedPrecondition", err)
		}
	})
	t.Run("invalid requests", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		in := startWith(t, db, "control-seed-invalid", now, withInbox, nil)
		ctx := withToken(callCtx(t), token)
		for name, req := range map[string]*controlv1.SeedCutoverRequest{
			"no mode":           {},
			"watermark for max": {Mode: controlv1.SeedMode_SEED_MODE_MAX, Watermark: 5},
			"negative ID":       {Mode: controlv1.SeedMode_SEED_MODE_ID, Watermark: -1},
		} {
			if _, err := in.client.SeedCutover(ctx, req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%s: SeedCutover = %v, want InvalidArgument", name, err)
			}
		}
	})
}

func TestStandbyRefusesMutations(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Now()
	procRow(t, db, 1, "DEAD", "EXHAUSTED", now)
	deadEvent := eventRow(t, db, "KAFKA:msg", "F1", 1, 1, "DEAD", now)
	first := startControl(t, db, "control-a", token, false, now)
	waitActive(t, first)
	second := startControl(t, db, "control-b", token, false, now)
	ctx := withToken(callCtx(t), token)

	calls := map[string]func() error{
		"Replay": func() error {
			_, err := second.client.Replay(ctx, &controlv1.ReplayRequest{Comment: "INC-T", MsgIds: []int64{1}})
			return err
		},
		"Reopen": func() error {
			_, err := second.client.Reopen(ctx, &controlv1.ReopenRequest{Comment: "INC-T", MsgIds: []int64{1}})
			return err
		},
		"RequeueEvents": func() error {
			_, err := second.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Comment: "INC-T", EventIds: []int64{deadEvent}})
			return err
		},
		"RequeueEvents dry run": func() error {
			_, err := second.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Target: "KAFKA:msg", DryRun: true})
			return err
		},
		"SeedCutover": func() error {
			_, err := second.client.SeedCutover(ctx, &controlv1.SeedCutoverRequest{Comment: "INC-T", Mode: controlv1.SeedMode_SEED_MODE_ZERO})
			return err
		},
		"ResolveContractViolation dry run": func() error {
			_, err := second.client.ResolveContractViolation(ctx, &controlv1.ResolveContractViolationRequest{
				Kind: controlv1.KindInboxBehindWatermark, Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, DryRun: true})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "control-a") {
			t.Errorf("%s on the standby = %v, want Unavailable naming control-a", name, err)
			continue
		}
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		if info.GetReason() != "STANDBY" || info.GetMetadata()["active_instance"] != "control-a" {
			t.Errorf("%s: error details = %v, want ErrorInfo STANDBY with active_instance control-a", name, st.Details())
		}
	}
	if st, _ := stateOf(t, db, 1); st != "DEAD" {
		t.Errorf("the standby's refused replay changed message 1 to %s", st)
	}
	if st, _, _ := eventState(t, db, deadEvent); st != "DEAD" {
		t.Errorf("the standby's refused requeue changed event %d to %s", deadEvent, st)
	}
	// Reads are served by the standby.
	if _, err := second.client.ListMessages(ctx, &controlv1.ListMessagesRequest{}); err != nil {
		t.Errorf("ListMessages on the standby: %v", err)
	}
	// The active instance serves the same call.
	if _, err := first.client.Replay(ctx, &controlv1.ReplayRequest{Comment: "INC-T", MsgIds: []int64{1}}); err != nil {
		t.Errorf("Replay on the active instance: %v", err)
	}
	if resp, err := first.client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Comment: "INC-T", EventIds: []int64{deadEvent}}); err != nil ||
		resp.GetRequeued() != 1 {
		t.Errorf("RequeueEvents on the active instance = %v, %v; want the event requeued", resp, err)
	}
}

func TestListMessages(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// 250 messages: every 10th DEAD(EXHAUSTED), every 25th abandoned, the rest SUCCEEDED.
	for id := int64(1); id <= 250; id++ {
		switch {
		case id%10 == 0:
			procRow(t, db, id, "DEAD", "EXHAUSTED", now)
		default:
			procRow(t, db, id, "SUCCEEDED", "", now)
		}
		if id%25 == 0 {
			db.Exec(t, `UPDATE proc_state SET backfill_abandoned_at = $2, backfill_abandon_reason = 'MISSING_ROW',
				backfill_next_at = NULL WHERE msg_id = $1`, id, now)
		}
	}
	in := startControl(t, db, "control-list", token, false, now)
	ctx := withToken(callCtx(t), token)
	all := func(req *controlv1.ListMessagesRequest) (ids []int64, pages int) {
		t.Helper()
		for {
			resp, err := in.client.ListMessages(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, m := range resp.GetMessages() {
				ids = append(ids, m.GetMsgId())
			}
			if resp.GetNextPageToken() == "" {
				return ids, pages
			}
			req.PageToken = resp.GetNextPageToken()
		}
	}

	ids, pages := all(&controlv1.ListMessagesRequest{})
	if len(ids) != 250 || pages != 3 || ids[0] != 1 || ids[249] != 250 || !slices.IsSorted(ids) {
		t.Errorf("all messages: %d in %d pages, want 250 in 3 pages of 100, in order", len(ids), pages)
	}
	ids, _ = all(&controlv1.ListMessagesRequest{States: []controlv1.MessageState{controlv1.MessageState_MESSAGE_STATE_DEAD}, PageSize: 7})
	if len(ids) != 25 || ids[0] != 10 {
		t.Errorf("DEAD: %v, want the 25 multiples of 10", ids)
	}
	ids, _ = all(&controlv1.ListMessagesRequest{
		ErrorClasses: []controlv1.ErrorClass{controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED},
		Range:        &controlv1.IdRange{First: 95, Last: 130},
	})
	if !slices.Equal(ids, []int64{100, 110, 120, 130}) {
		t.Errorf("EXHAUSTED in 95-130: %v, want [100 110 120 130]", ids)
	}
	ids, _ = all(&controlv1.ListMessagesRequest{Abandoned: true})
	if !slices.Equal(ids, []int64{25, 50, 75, 100, 125, 150, 175, 200, 225, 250}) {
		t.Errorf("abandoned: %v, want the multiples of 25", ids)
	}
	for name, req := range map[string]*controlv1.ListMessagesRequest{
		"bad token":     {PageToken: "not-a-token"},
		"page too big":  {PageSize: 5000},
		"unknown state": {States: []controlv1.MessageState{controlv1.MessageState_MESSAGE_STATE_UNSPECIFIED}},
	} {
		if _, err := in.client.ListMessages(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: ListMessages = %v, want InvalidArgument", name, err)
		}
	}
}

func TestGetMessageWithRawAndEvents(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	my := mysqltest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const xml = "<MSG><META><TYPE>SCHD</TYPE><STYP>ADFT</STYP></META>\n<SCHD>旅客</SCHD></MSG>"
	id := my.InsertInbox(t, xml, nil)
	procRow(t, db, id, "SUCCEEDED", "", now)
	procRow(t, db, id+1, "DEAD", "MALFORMED", now) // no inbox row
	for i, target := range []string{"KAFKA:msg", "KAFKA:schd"} {
		db.Exec(t, `INSERT INTO msg_event (target, partition_key, event_type, state_version, payload, msg_id, state, sent_at,
			created_at, updated_at) VALUES ($1, 'F1', 'UPSERT', $2, '{"flid":"F1"}', $3, 'SENT', $4, $4, $4)`, target, i+1, id, now)
	}
	in := startWith(t, db, "control-get", now, func(cfg *config.Config) { cfg.MySQL.DSN = my.ServiceDSN }, nil)
	ctx := withToken(callCtx(t), token)

	got, err := in.client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetRawStatus() != controlv1.RawStatus_RAW_STATUS_OK || got.GetRawXml() != xml {
		t.Errorf("raw = %v %q, want OK and the inbox text", got.GetRawStatus(), got.GetRawXml())
	}
	ev := got.GetEvents()
	if len(ev) != 2 || ev[0].GetTarget() != "KAFKA:msg" || ev[1].GetTarget() != "KAFKA:schd" ||
		ev[0].GetState() != controlv1.EventState_EVENT_STATE_SENT || ev[0].GetPayloadJson() != `{"flid": "F1"}` ||
		ev[1].GetStateVersion() != 2 || !ev[0].GetSentAt().AsTime().Equal(now) {
		t.Errorf("events = %v, want the SENT KAFKA:msg and KAFKA:schd events", ev)
	}

	got, err = in.client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: id + 1})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetRawStatus() != controlv1.RawStatus_RAW_STATUS_MISSING || got.GetRawXml() != "" || len(got.GetEvents()) != 0 {
		t.Errorf("message without inbox row: %v, want RAW_STATUS_MISSING and no events", got)
	}

	// A text longer than control.max-body-chars is truncated, and read whole chunk by chunk;
	// here the kept text of a purged row, cut by characters as the inbox's is.
	long := "<MSG>" + strings.Repeat("旅客x", 4000) + "</MSG>"
	procRow(t, db, id+2, "DEAD", "MALFORMED", now)
	if err := queue.KeepRaw(t.Context(), db.Pool, id+2, long, now); err != nil {
		t.Fatal(err)
	}
	small := startWith(t, db, "control-get-small", now, func(cfg *config.Config) {
		cfg.MySQL.DSN = my.ServiceDSN
		cfg.Control.MaxBodyChars = config.MinControlBodyChars
	}, nil)
	chars := int64(utf8.RuneCountInString(long))
	got, err = small.client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: id + 2})
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetBodyTruncated() || got.GetBodyChars() != chars || got.GetRawSource() != "kept" ||
		utf8.RuneCountInString(got.GetRawXml()) != config.MinControlBodyChars || !strings.HasPrefix(long, got.GetRawXml()) {
		t.Errorf("a long kept text: truncated %v, %d of %d characters from %q; want the first %d of %d, truncated",
			got.GetBodyTruncated(), utf8.RuneCountInString(got.GetRawXml()), got.GetBodyChars(), got.GetRawSource(), config.MinControlBodyChars, chars)
	}
	var whole strings.Builder
	for offset := int64(0); ; {
		chunk, err := small.client.GetMessageBody(ctx, &controlv1.GetMessageBodyRequest{MsgId: id + 2, Offset: offset, Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if n := utf8.RuneCountInString(chunk.GetText()); n > config.MinControlBodyChars || chunk.GetBodyChars() != chars {
			t.Fatalf("a chunk of %d characters of %d, want at most %d of %d", n, chunk.GetBodyChars(), config.MinControlBodyChars, chars)
		}
		whole.WriteString(chunk.GetText())
		if chunk.GetEof() {
			break
		}
		offset = chunk.GetNextOffset()
	}
	if whole.String() != long {
		t.Errorf("the chunks make %d bytes, want the %d kept", whole.Len(), len(long))
	}
	got, err = small.client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: id})
	if err != nil || got.GetBodyTruncated() || got.GetBodyChars() != int64(utf8.RuneCountInString(xml)) || got.GetRawSource() != "inbox" {
		t.Errorf("a short inbox text: %v, truncated %v, %d characters; want whole, %d", err, got.GetBodyTruncated(), got.GetBodyChars(), utf8.RuneCountInString(xml))
	}
	if _, err := small.client.GetMessageBody(ctx, &controlv1.GetMessageBodyRequest{MsgId: id + 1}); status.Code(err) != codes.NotFound {
		t.Errorf("GetMessageBody of a message without any text: %v, want NOT_FOUND", err)
	}

	// An unreachable inbox does not fail the call.
	other := startControl(t, db, "control-get-noinbox", token, false, now)
	got, err = other.client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetRawStatus() != controlv1.RawStatus_RAW_STATUS_UNAVAILABLE || got.GetRawError() == "" || got.GetMessage().GetMsgId() != id {
		t.Errorf("with the inbox down: %v, want the record and RAW_STATUS_UNAVAILABLE", got)
	}
	st, err := other.client.GetStatus(ctx, &controlv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d := st.GetDiscovery(); d.InboxMaxId != nil || d.Lag != nil || d.GetInboxError() == "" {
		t.Errorf("status with the inbox down: %v, want no lag and the inbox error", d)
	}
}
