package api

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// AcknowledgeDead implements ControlService.AcknowledgeDead through queue.AcknowledgeDead on
// the control role's lock connection. The caller (the token's fingerprint or the certificate's
// subject) is kept with each row, as the audit log keeps it with the call. A dry run answers the
// rows it would acknowledge and changes none.
func (s *Service) AcknowledgeDead(ctx context.Context, req *controlv1.AcknowledgeDeadRequest) (*controlv1.AcknowledgeDeadResponse, error) {
	ar := queue.AckRequest{MsgIDs: req.GetMsgIds(), By: s.caller(ctx), Reason: strings.TrimSpace(req.GetReason()), Limit: selectionLimit,
		DryRun: req.GetDryRun()}
	if c := req.GetErrorClass(); c != controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
		ar.Class = queue.ErrorClass(strings.TrimPrefix(c.String(), classPrefix))
	}
	var res queue.AckResult
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = queue.AcknowledgeDead(ctx, tx, ar, s.cfg.Clock.Now())
		return err
	})
	if err != nil {
		return nil, s.writeStatus(ctx, "acknowledge dead", err)
	}
	return &controlv1.AcknowledgeDeadResponse{
		Acknowledged:           int64(len(res.Acknowledged)),
		AcknowledgedIds:        res.Acknowledged,
		AlreadyAcknowledgedIds: res.Already,
		NotDeadIds:             res.NotDead,
		NotFoundIds:            res.NotFound,
		More:                   res.More,
		DryRun:                 req.GetDryRun(),
	}, nil
}
