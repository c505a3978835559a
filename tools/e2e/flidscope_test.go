package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// A FLID in a job scope and RequeueEvents' flid are refused INVALID_ARGUMENT by the real control
// binary, naming the field (issue #57, finding 4): before, a 500,000-byte flid reached the outbox
// query and a job scope took any FLID that was not blank.
func TestControlRefusesInvalidFLIDs(t *testing.T) {
	e := newEnv(t)
	e.startControl(t)
	client := controlv1.NewControlServiceClient(e.grpcConn(t))
	ctx, cancel := context.WithTimeout(withToken(context.Background(), e.token), 20*time.Second)
	defer cancel()

	huge := strings.Repeat("9", 500_000)
	calls := []struct {
		name, field string
		call        func() error
	}{
		{"RequeueEvents with a 500,000-byte flid", "flid must be 1 to 200 bytes, got 500000", func() error {
			_, err := client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Target: controlv1.TargetKafkaMsg, Flid: huge, DryRun: true})
			return err
		}},
		{"Republish with a too-long FLID second", "flid[1] must be 1 to 200 bytes, got 201", func() error {
			_, err := client.Republish(ctx, &controlv1.RepublishRequest{Comment: "INC-T", Flid: []string{"2718281", strings.Repeat("9", 201)}})
			return err
		}},
		{"RebuildProjection with a blank FLID", "flid[0] is an empty FLID", func() error {
			_, err := client.RebuildProjection(ctx, &controlv1.RebuildProjectionRequest{Flid: []string{" "}, DryRun: true})
			return err
		}},
	}
	for _, c := range calls {
		err := c.call()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %.300v, want INVALID_ARGUMENT containing %q", c.name, err, c.field)
		}
	}

	// A valid FLID still passes: the dry run of a requeue narrowed to one flight answers.
	if _, err := client.RequeueEvents(ctx, &controlv1.RequeueEventsRequest{Target: controlv1.TargetKafkaMsg, Flid: "2718281", DryRun: true}); err != nil {
		t.Errorf("RequeueEvents with a valid flid: %v", err)
	}
}
