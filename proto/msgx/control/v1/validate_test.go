package controlv1_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", controlv1.MaxCommentLen+1)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	many := make([]int64, controlv1.MaxSelectedIDs+1)
	for i := range many {
		many[i] = int64(i + 1)
	}
	tests := []struct {
		name string
		req  interface{ Validate() error }
		err  string // substring; empty = valid
	}{
		{"get message", &controlv1.GetMessageRequest{MsgId: 1}, ""},
		{"get message zero", &controlv1.GetMessageRequest{}, "msg_id must be a positive"},
		{"get body", &controlv1.GetMessageBodyRequest{MsgId: 1, Offset: 262144, Limit: 1000}, ""},
		{"get body defaults", &controlv1.GetMessageBodyRequest{MsgId: 1}, ""},
		{"get body zero", &controlv1.GetMessageBodyRequest{}, "msg_id must be a positive"},
		{"get body negative offset", &controlv1.GetMessageBodyRequest{MsgId: 1, Offset: -1}, "offset must not be negative"},
		{"get body negative limit", &controlv1.GetMessageBodyRequest{MsgId: 1, Limit: -5}, "limit must be 0"},
		{"status", &controlv1.GetStatusRequest{}, ""},
		{"list all", &controlv1.ListMessagesRequest{}, ""},
		{"list filtered", &controlv1.ListMessagesRequest{States: []controlv1.MessageState{controlv1.MessageState_MESSAGE_STATE_DEAD},
			Range: &controlv1.IdRange{First: 1, Last: 1}, PageSize: controlv1.MaxPageSize}, ""},
		{"list page too big", &controlv1.ListMessagesRequest{PageSize: controlv1.MaxPageSize + 1}, "page_size"},
		{"list negative page", &controlv1.ListMessagesRequest{PageSize: -1}, "page_size"},
		{"list unspecified state", &controlv1.ListMessagesRequest{States: []controlv1.MessageState{0}}, "states"},
		{"list unknown class", &controlv1.ListMessagesRequest{ErrorClasses: []controlv1.ErrorClass{42}}, "error_classes"},
		{"list reversed range", &controlv1.ListMessagesRequest{Range: &controlv1.IdRange{First: 3, Last: 2}}, "range"},
		{"list by flight", &controlv1.ListMessagesRequest{Flid: "2718281", FlightNumber: "CA1501", OperationDay: "2026-03-01",
			EnqueuedFrom: timestamppb.New(t0), EnqueuedTo: timestamppb.New(t0.Add(time.Hour))}, ""},
		{"list flight number without day", &controlv1.ListMessagesRequest{FlightNumber: "CA1501"}, "go together"},
		{"list bad day", &controlv1.ListMessagesRequest{FlightNumber: "CA1501", OperationDay: "01.03.2026"}, "YYYY-MM-DD"},
		{"list acknowledged", &controlv1.ListMessagesRequest{Acknowledged: controlv1.AckFilter_ACK_FILTER_ACKNOWLEDGED}, ""},
		{"list unknown ack filter", &controlv1.ListMessagesRequest{Acknowledged: 9}, "acknowledged"},
		{"republish all", &controlv1.RepublishRequest{All: true}, ""},
		{"republish flids", &controlv1.RepublishRequest{Flid: []string{"F1"}}, ""},
		{"republish both", &controlv1.RepublishRequest{All: true, Flid: []string{"F1"}}, "not both"},
		{"republish nothing", &controlv1.RepublishRequest{}, "set all"},
		{"republish empty flid", &controlv1.RepublishRequest{Flid: []string{" "}}, "flid[0] is an empty FLID"},
		{"republish long comment", &controlv1.RepublishRequest{All: true, Comment: long}, "comment"},
		{"get republish zero", &controlv1.GetRepublishRequest{}, "republish_id"},
		{"list republishes page", &controlv1.ListRepublishesRequest{PageSize: controlv1.MaxPageSize + 1}, "page_size"},
		{"cancel republish zero", &controlv1.CancelRepublishRequest{}, "republish_id"},
		{"ack ids", &controlv1.AcknowledgeDeadRequest{MsgIds: []int64{1}, Reason: "reviewed"}, ""},
		{"ack class", &controlv1.AcknowledgeDeadRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_MALFORMED, Reason: "reviewed"}, ""},
		{"ack no reason", &controlv1.AcknowledgeDeadRequest{MsgIds: []int64{1}, Reason: "  "}, "reason is required"},
		{"ack no selector", &controlv1.AcknowledgeDeadRequest{Reason: "reviewed"}, "set msg_ids or error_class"},
		{"ack both", &controlv1.AcknowledgeDeadRequest{MsgIds: []int64{1}, ErrorClass: controlv1.ErrorClass_ERROR_CLASS_MALFORMED, Reason: "r"}, "not both"},
		{"ack bad id", &controlv1.AcknowledgeDeadRequest{MsgIds: []int64{0}, Reason: "r"}, "positive"},
		{"ack long reason", &controlv1.AcknowledgeDeadRequest{MsgIds: []int64{1}, Reason: long}, "reason is"},
		{"list empty window", &controlv1.ListMessagesRequest{EnqueuedFrom: timestamppb.New(t0), EnqueuedTo: timestamppb.New(t0)}, "before"},
		{"get flight", &controlv1.GetFlightRequest{Flid: "2718281", Limit: controlv1.MaxFlightLimit}, ""},
		{"get flight without flid", &controlv1.GetFlightRequest{}, "flid"},
		{"get flight limit too big", &controlv1.GetFlightRequest{Flid: "1", Limit: controlv1.MaxFlightLimit + 1}, "limit"},
		{"replay ids", &controlv1.ReplayRequest{MsgIds: []int64{1, 2}}, ""},
		{"replay class and range", &controlv1.ReplayRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_INFRA,
			Range: &controlv1.IdRange{First: 1, Last: 9}}, ""},
		{"replay nothing", &controlv1.ReplayRequest{DryRun: true}, "at least one"},
		{"replay MALFORMED", &controlv1.ReplayRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_MALFORMED}, "never replayed"},
		{"replay PROTOCOL", &controlv1.ReplayRequest{ErrorClass: controlv1.ErrorClass_ERROR_CLASS_PROTOCOL}, "never replayed"},
		{"replay zero id", &controlv1.ReplayRequest{MsgIds: []int64{0}}, "positive"},
		{"replay too many ids", &controlv1.ReplayRequest{MsgIds: many}, "select a range"},
		{"replay long comment", &controlv1.ReplayRequest{MsgIds: []int64{1}, Comment: long}, "comment"},
		{"replay empty range", &controlv1.ReplayRequest{Range: &controlv1.IdRange{}}, "range"},
		{"reopen reason", &controlv1.ReopenRequest{Reason: controlv1.AbandonReason_ABANDON_REASON_MISSING_ROW}, ""},
		{"reopen nothing", &controlv1.ReopenRequest{}, "at least one"},
		{"reopen unknown reason", &controlv1.ReopenRequest{Reason: 9}, "reason"},
		{"requeue target", &controlv1.RequeueEventsRequest{Target: controlv1.TargetKafkaMsg, Flid: "F1", MsgId: 3, Limit: 10}, ""},
		{"requeue ids", &controlv1.RequeueEventsRequest{EventIds: []int64{1, 2}, DryRun: true}, ""},
		{"requeue nothing", &controlv1.RequeueEventsRequest{Flid: "F1"}, "at least one"},
		{"requeue unknown target", &controlv1.RequeueEventsRequest{Target: "kafka:msg"}, "target must be"},
		{"requeue zero id", &controlv1.RequeueEventsRequest{EventIds: []int64{0}}, "positive"},
		{"requeue too many ids", &controlv1.RequeueEventsRequest{EventIds: many[:controlv1.MaxRequeueEvents+1]}, "select by target"},
		{"requeue limit too big", &controlv1.RequeueEventsRequest{Target: controlv1.TargetKafkaSchd, Limit: controlv1.MaxRequeueEvents + 1}, "limit"},
		{"requeue negative msg_id", &controlv1.RequeueEventsRequest{Target: controlv1.TargetKafkaSchd, MsgId: -1}, "msg_id"},
		{"requeue long comment", &controlv1.RequeueEventsRequest{Target: controlv1.TargetKafkaMsg, Comment: long}, "comment"},
		{"get reference", &controlv1.GetReferenceRequest{Rtype: "CHLT", Rkey: "C12"}, ""},
		{"get reference unknown category", &controlv1.GetReferenceRequest{Rtype: "DLYL", Rkey: "x"}, "rtype must be one of"},
		{"get reference no key", &controlv1.GetReferenceRequest{Rtype: "GLST"}, "rkey must be"},
		{"list reference", &controlv1.ListReferenceRequest{Rtype: "GLST", PageSize: controlv1.MaxPageSize}, ""},
		{"list reference no category", &controlv1.ListReferenceRequest{}, "rtype must be one of"},
		{"list reference page too big", &controlv1.ListReferenceRequest{Rtype: "GLST", PageSize: controlv1.MaxPageSize + 1}, "page_size"},
		{"resource status", &controlv1.GetResourceStatusRequest{Rtyp: "GATE", Rsid: "G17"}, ""},
		{"resource status RSTA type", &controlv1.GetResourceStatusRequest{Rtyp: "GLST", Rsid: "G17"}, "rtyp must be one of"},
		{"resource status no id", &controlv1.GetResourceStatusRequest{Rtyp: "BELT"}, "rsid must be"},
		{"schedule one day", &controlv1.RequestScheduleRequest{FromDay: "2026-03-01", ToDay: "2026-03-01"}, ""},
		{"schedule seven days", &controlv1.RequestScheduleRequest{FromDay: "2026-02-26", ToDay: "2026-03-04"}, ""},
		{"schedule eight days", &controlv1.RequestScheduleRequest{FromDay: "2026-02-26", ToDay: "2026-03-05"}, "at most 7"},
		{"schedule reversed", &controlv1.RequestScheduleRequest{FromDay: "2026-03-02", ToDay: "2026-03-01"}, "after to_day"},
		{"schedule no days", &controlv1.RequestScheduleRequest{}, "from_day must be a day"},
		{"schedule SIS day", &controlv1.RequestScheduleRequest{FromDay: "01MAR26", ToDay: "2026-03-01"}, "YYYY-MM-DD"},
		{"schedule long comment", &controlv1.RequestScheduleRequest{FromDay: "2026-03-01", ToDay: "2026-03-01", Comment: long}, "comment"},
		{"reference category", &controlv1.RequestReferenceRequest{Category: "GLST"}, ""},
		{"reference RSTA", &controlv1.RequestReferenceRequest{Category: "RSTA", Rtyp: "STND"}, ""},
		{"reference RSTA without rtyp", &controlv1.RequestReferenceRequest{Category: "RSTA"}, "rtyp must be one of"},
		{"reference rtyp with a category", &controlv1.RequestReferenceRequest{Category: "GLST", Rtyp: "GATE"}, "only for RSTA"},
		{"reference unknown", &controlv1.RequestReferenceRequest{Category: "glst"}, "category must be one of"},
		{"list requests", &controlv1.ListRequestsRequest{State: controlv1.RequestState_REQUEST_STATE_SENT, Type: controlv1.RequestType_REQUEST_TYPE_RQFD}, ""},
		{"list requests unknown state", &controlv1.ListRequestsRequest{State: 9}, "state"},
		{"list requests page too big", &controlv1.ListRequestsRequest{PageSize: controlv1.MaxPageSize + 1}, "page_size"},
		{"seed max", &controlv1.SeedCutoverRequest{Mode: controlv1.SeedMode_SEED_MODE_MAX}, ""},
		{"seed id 0", &controlv1.SeedCutoverRequest{Mode: controlv1.SeedMode_SEED_MODE_ID}, ""},
		{"seed no mode", &controlv1.SeedCutoverRequest{}, "mode is required"},
		{"seed watermark with min", &controlv1.SeedCutoverRequest{Mode: controlv1.SeedMode_SEED_MODE_MIN, Watermark: 3}, "only for SEED_MODE_ID"},
		{"seed negative", &controlv1.SeedCutoverRequest{Mode: controlv1.SeedMode_SEED_MODE_ID, Watermark: -3}, "negative"},
		{"seed unknown mode", &controlv1.SeedCutoverRequest{Mode: 17}, "mode"},
		{"resolve resume behind", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindInboxBehindWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME}, ""},
		{"resolve skip marked", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_SKIP_MARKED, Through: 9, DryRun: true}, ""},
		{"resolve resume marked", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME}, ""},
		{"resolve no kind", &controlv1.ResolveContractViolationRequest{Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME}, "kind must be"},
		{"resolve unknown kind", &controlv1.ResolveContractViolationRequest{Kind: "inbox-behind",
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME}, "kind must be"},
		{"resolve no resolution", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindInboxBehindWatermark}, "resolution is required"},
		{"resolve unknown resolution", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindInboxBehindWatermark, Resolution: 7}, "resolution"},
		{"resolve skip behind", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindInboxBehindWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_SKIP_MARKED}, "SKIP_MARKED resolves only"},
		{"resolve through with resume", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, Through: 5}, "only for SKIP_MARKED"},
		{"resolve negative through", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_SKIP_MARKED, Through: -1}, "through must be"},
		{"resolve with since", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, Since: timestamppb.New(t0)}, ""},
		{"resolve since at zero", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, Since: &timestamppb.Timestamp{}}, "since 1970-01-01T00:00:00Z is before 2020-01-01"},
		{"resolve since bad nanos", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, Since: &timestamppb.Timestamp{Seconds: t0.Unix(), Nanos: -1}}, "since is not a valid time"},
		{"resolve long comment", &controlv1.ResolveContractViolationRequest{Kind: controlv1.KindMarkedAboveWatermark,
			Resolution: controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME, Comment: long}, "comment"},
		{"rebuild all", &controlv1.RebuildProjectionRequest{All: true, DryRun: true}, ""},
		{"rebuild flids", &controlv1.RebuildProjectionRequest{Flid: []string{"F1", "F2"}}, ""},
		{"rebuild nothing", &controlv1.RebuildProjectionRequest{}, "set all"},
		{"rebuild both", &controlv1.RebuildProjectionRequest{All: true, Flid: []string{"F1"}}, "not both"},
		{"rebuild empty flid", &controlv1.RebuildProjectionRequest{Flid: []string{" "}}, "flid[0] is an empty FLID"},
		{"rebuild too many", &controlv1.RebuildProjectionRequest{Flid: make([]string, controlv1.MaxRebuildFLIDs+1)}, "at most"},
		{"get rebuild zero", &controlv1.GetProjectionRebuildRequest{}, "rebuild_id"},
		{"cancel rebuild zero", &controlv1.CancelProjectionRebuildRequest{}, "rebuild_id"},
		{"list rebuilds big page", &controlv1.ListProjectionRebuildsRequest{PageSize: 5000}, "page_size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.req.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Validate = %v, want valid", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Validate = %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// Every FLID of a job scope and RequeueEvents' flid is checked as GetFlight's is (1 to
// MaxKeyLen bytes), and the error names the field and, in a list, the index.
func TestValidateFLIDs(t *testing.T) {
	t.Parallel()
	tooLong := strings.Repeat("9", controlv1.MaxKeyLen+1)
	huge := strings.Repeat("9", 500_000)
	longest := strings.Repeat("9", controlv1.MaxKeyLen)
	type flidReq = func(flids ...string) interface{ Validate() error }
	rpcs := map[string]flidReq{
		"republish": func(f ...string) interface{ Validate() error } { return &controlv1.RepublishRequest{Flid: f} },
		"rebuild":   func(f ...string) interface{ Validate() error } { return &controlv1.RebuildProjectionRequest{Flid: f} },
	}
	tests := []struct {
		name  string
		flids []string
		err   string // substring; empty = valid
	}{
		{"valid", []string{"2718281", longest}, ""},
		{"too long", []string{"2718281", tooLong}, "flid[1] must be 1 to 200 bytes, got 201"},
		{"500,000 bytes", []string{huge}, "flid[0] must be 1 to 200 bytes, got 500000"},
		{"empty", []string{"1", "2", ""}, "flid[2] must be 1 to 200 bytes, got 0"},
		{"blank", []string{"1", "  "}, "flid[1] is an empty FLID"},
	}
	for rpc, mk := range rpcs {
		for _, tc := range tests {
			t.Run(rpc+" "+tc.name, func(t *testing.T) {
				t.Parallel()
				checkValidate(t, mk(tc.flids...), tc.err)
			})
		}
	}
	requeue := []struct {
		name, flid, err string
	}{
		{"valid", "2718281", ""},
		{"longest", longest, ""},
		{"unset", "", ""},
		{"too long", tooLong, "flid must be 1 to 200 bytes, got 201"},
		{"500,000 bytes", huge, "flid must be 1 to 200 bytes, got 500000"},
	}
	for _, tc := range requeue {
		t.Run("requeue "+tc.name, func(t *testing.T) {
			t.Parallel()
			checkValidate(t, &controlv1.RequeueEventsRequest{Target: controlv1.TargetKafkaMsg, Flid: tc.flid}, tc.err)
		})
	}
	// One bad FLID among the bound's worth is reported once, not once per FLID.
	many := make([]string, controlv1.MaxRebuildFLIDs)
	for i := range many {
		many[i] = tooLong
	}
	err := (&controlv1.RebuildProjectionRequest{Flid: many}).Validate()
	if err == nil || strings.Count(err.Error(), "must be 1 to") != 1 {
		t.Errorf("Validate of %d bad FLIDs = %.200v, want one error line", len(many), err)
	}
}

func checkValidate(t *testing.T, req interface{ Validate() error }, want string) {
	t.Helper()
	err := req.Validate()
	switch {
	case want == "" && err != nil:
		t.Errorf("Validate = %v, want valid", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("Validate = %.300v, want an error containing %q", err, want)
	}
}

// A since further ahead of the server's clock than MaxClockSkew is refused; within the skew,
// unset or invalid (Validate's), it passes.
func TestValidateSinceAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		since *timestamppb.Timestamp
		err   string
	}{
		{"unset", nil, ""},
		{"now", timestamppb.New(now), ""},
		{"within the skew", timestamppb.New(now.Add(controlv1.MaxClockSkew)), ""},
		{"past the skew", timestamppb.New(now.Add(controlv1.MaxClockSkew + time.Second)), "5m1s after the server's clock"},
		{"a year ahead", timestamppb.New(now.AddDate(1, 0, 0)), "more than the 5m0s of skew allowed"},
	} {
		r := &controlv1.ResolveContractViolationRequest{Since: tc.since}
		err := r.ValidateSinceAt(now)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}
