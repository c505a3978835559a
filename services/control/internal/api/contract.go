package api

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// resolutions maps the API's resolutions to the cursor's actions.
var resolutions = map[controlv1.ContractResolution]cursor.Action{
	controlv1.ContractResolution_CONTRACT_RESOLUTION_RESUME:      cursor.ActionResume,
	controlv1.ContractResolution_CONTRACT_RESOLUTION_SKIP_MARKED: cursor.ActionSkipMarked,
}

// errSkipUnforced refuses skip-marked of marked-above-watermark without force (R-RESTORE-3).
var errSkipUnforced = errors.New("skip-marked leaves the flights at the backup's state while consumers already hold the changes of the " +
	"skipped rows, so the next change of those flights takes them back downstream; resume processes the rows again, published above " +
	"what consumers hold once msgx-dispatcher version-floor ran; set force to skip anyway (docs/runbooks.md, \"Restoring PostgreSQL from a backup\")")

// rewindsConsumers reports whether r is the resolution that leaves consumers ahead of the
// flight state: the skip of rows processed in a timeline a restore took back (R-RESTORE-3).
func rewindsConsumers(r cursor.Resolution) bool {
	return r.Action == cursor.ActionSkipMarked && r.Kind == cursor.KindMarkedAbove
}

// errResumeWithoutFloor refuses resume of marked-above-watermark before the version floor
// was recorded after the restored timeline's markers (R-RESTORE-1, R-RESTORE-3).
var errResumeWithoutFloor = errors.New("resume would publish the re-processed rows' changes at the restored versions, below what " +
	"consumers already hold: stop every service, run msgx-dispatcher version-floor, start them and resume; set force to resume anyway " +
	"(docs/runbooks.md, \"Restoring PostgreSQL from a backup\")")

// resumesRestored reports whether r processes again rows a restore took back.
func resumesRestored(r cursor.Resolution) bool {
	return r.Action == cursor.ActionResume && r.Kind == cursor.KindMarkedAbove
}

// floorAfterMarkers refuses unless a version floor was recorded after the first marked row's
// marker: the marker was written in the timeline the restore took back, so only a floor read
// from Kafka after it covers what that timeline published. Without a marker watch, or with no
// marked row left above W, there is nothing to tell it by and nothing is refused.
func (s *Service) floorAfterMarkers(ctx context.Context, op string, cur cursor.Cursor, view cursor.ResolutionView) error {
	if cur.MarkerSince == nil {
		return nil
	}
	_, at, found, err := s.cfg.Inbox.FirstMarkedSince(ctx, cur.W, view.InboxMax, *cur.MarkerSince)
	if err != nil {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		return status.Errorf(codes.Unavailable, "%s: %v", op, err)
	}
	if !found {
		return nil
	}
	floorAt, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) (*time.Time, error) { return flightstore.FloorRecordedAt(ctx, tx) })
	if err != nil {
		return toStatus(ctx, op, err)
	}
	if floorAt == nil || floorAt.Before(at) {
		last := "never"
		if floorAt != nil {
			last = floorAt.UTC().Format(time.RFC3339)
		}
		return status.Errorf(codes.FailedPrecondition, "%s: %v (the first marked row above W was marked %s; the version floor was last recorded %s)",
			op, errResumeWithoutFloor, at.UTC().Format(time.RFC3339), last)
	}
	return nil
}

// ResolveContractViolation implements ControlService.ResolveContractViolation through
// cursor.ReadResolution and cursor.Resolve. The cursor is read first, then the inbox, outside
// the transaction (the lock connection must not wait on MySQL); the write re-checks that
// neither W nor the violation changed meanwhile.
func (s *Service) ResolveContractViolation(ctx context.Context, req *controlv1.ResolveContractViolationRequest) (*controlv1.ResolveContractViolationResponse, error) {
	const op = "resolve contract violation"
	action, ok := resolutions[req.GetResolution()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "resolution %s is not supported", req.GetResolution())
	}
	if err := req.ValidateSinceAt(s.cfg.Clock.Now()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	}
	// Refused by a standby before the inbox is read: only the active instance decides, and
	// its answer (or refusal) is the one the operator needs.
	if !s.cfg.Elector.Active() {
		return nil, s.standby(ctx, op)
	}
	r := cursor.Resolution{Kind: req.GetKind(), Action: action, Through: req.GetThrough()}
	if req.GetSince() != nil {
		since := req.GetSince().AsTime()
		r.Since = &since
	}
	cur, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) (cursor.Cursor, error) { return cursor.Load(ctx, tx) })
	if err != nil {
		return nil, toStatus(ctx, op, err)
	}
	view, err := cursor.ReadResolution(ctx, s.cfg.Inbox, cur, r)
	switch {
	case err == nil:
	case errors.Is(err, cursor.ErrResolveRefused):
		return nil, status.Errorf(codes.FailedPrecondition, "%s: %v", op, err)
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	default:
		// Only the inbox is read here: unreachable, nothing decided.
		return nil, status.Errorf(codes.Unavailable, "%s: %v", op, err)
	}
	// Checked after the inbox was read, so a skip the data refuses says why first; a dry run
	// is answered, since it changes nothing and shows what a forced skip would pass.
	if rewindsConsumers(r) && !req.GetForce() && !req.GetDryRun() {
		return nil, status.Errorf(codes.FailedPrecondition, "%s: %v", op, errSkipUnforced)
	}
	if resumesRestored(r) && !req.GetForce() {
		if err := s.floorAfterMarkers(ctx, op, cur, view); err != nil {
			return nil, err
		}
	}
	now := s.cfg.Clock.Now()
	var res cursor.Resolved
	err = s.write(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = cursor.Resolve(ctx, tx, r, view, req.GetDryRun(), now)
		return err
	})
	if err != nil {
		return nil, s.writeStatus(ctx, op, err)
	}
	return &controlv1.ResolveContractViolationResponse{
		DryRun:          req.GetDryRun(),
		Resolved:        contractViolation(cur.Violation),
		Resolution:      req.GetResolution(),
		WatermarkBefore: res.Before,
		Watermark:       res.W,
		Skipped:         res.Skipped,
		FirstUnmarkedId: res.FirstUnmarked,
		More:            res.More,
		InboxMaxId:      res.InboxMax,
		ResolvedAt:      timestamp(now),
	}, nil
}
