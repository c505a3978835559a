package api

import (
	"testing"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// The API validates targets with its own constants (the proto module does not import pkg);
// this fails when they and the outbox's words drift apart.
func TestRequeueTargetsMatchTheOutbox(t *testing.T) {
	t.Parallel()
	if controlv1.TargetKafkaMsg != outbox.TargetMsg || controlv1.TargetKafkaSchd != outbox.TargetSchd {
		t.Errorf("API targets %q, %q; outbox targets %q, %q", controlv1.TargetKafkaMsg, controlv1.TargetKafkaSchd,
			outbox.TargetMsg, outbox.TargetSchd)
	}
	for _, target := range []string{outbox.TargetMsg, outbox.TargetSchd} {
		if err := (&controlv1.RequeueEventsRequest{Target: target}).Validate(); err != nil {
			t.Errorf("a requeue of target %s is refused: %v", target, err)
		}
	}
}
