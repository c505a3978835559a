package e2e

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// TestRequestReachesCOUTMSGS runs the production binaries: a schedule request registered
// through control is written to COUTMSGS by the dispatcher, exactly once, and marked SENT with
// the row's ID.
func TestRequestReachesCOUTMSGS(t *testing.T) {
	e := newEnv(t)
	e.start(t, "control", "dispatcher")
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := controlv1.NewControlServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+e.token)

	var req *controlv1.UpstreamRequest
	waitFor(t, 30*time.Second, "control to register the request", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := client.RequestSchedule(cctx, &controlv1.RequestScheduleRequest{FromDay: "2026-03-02", ToDay: "2026-03-02", Comment: "e2e"})
		if err != nil {
			return false, err.Error()
		}
		req = resp.GetRequest()
		return true, ""
	})
	var sent *controlv1.UpstreamRequest
	waitFor(t, 30*time.Second, "the dispatcher to mark it SENT", func() (bool, string) {
		list, err := client.ListRequests(ctx, &controlv1.ListRequestsRequest{})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range list.GetRequests() {
			if r.GetReqId() == req.GetReqId() && r.GetState() == controlv1.RequestState_REQUEST_STATE_SENT {
				sent = r
				return true, ""
			}
		}
		return false, list.String()
	})
	rows, err := e.my.Admin.QueryContext(t.Context(), `SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG, ROUTINGID FROM coutmsgs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var text, routing string
		if err := rows.Scan(&id, &text, &routing); err != nil {
			t.Fatal(err)
		}
		n++
		if id != sent.GetCoutmsgsId() || text != req.GetPayload() || routing != "AODB" {
			t.Errorf("COUTMSGS row %d (%s) = %q, want %d with the registered payload", id, routing, text, sent.GetCoutmsgsId())
		}
	}
	if n != 1 {
		t.Errorf("COUTMSGS holds %d rows, want 1", n)
	}
}
