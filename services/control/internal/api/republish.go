package api

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"

	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// Republish implements ControlService.Republish: it registers the job in schd_republish on the
// control role's lock connection; the backfill role executes it. A job already open is
// returned instead (already_running), so asking twice never runs two. A dry run registers
// nothing and answers the open job, or the one it would register with its flights counted.
func (s *Service) Republish(ctx context.Context, req *controlv1.RepublishRequest) (*controlv1.RepublishResponse, error) {
	spec := jobs.RepublishSpec{FLIDs: req.GetFlid(), RequestedBy: s.caller(ctx), Comment: req.GetComment()}
	var (
		job      jobs.RepublishJob
		existing bool
		pending  int64
		unknown  []string
	)
	err := s.writeJob(ctx, "republish", jobs.ErrRepublishInvalid, codes.InvalidArgument, func(tx pgx.Tx) error {
		var err error
		now := s.cfg.Clock.Now()
		if !req.GetDryRun() {
			job, existing, err = jobs.RequestRepublish(ctx, tx, spec, now)
		} else if job, existing, err = jobs.PreviewRepublish(ctx, tx, spec, now); err == nil && !existing {
			unknown, err = s.countRepublish(ctx, tx, &job)
		}
		if err != nil {
			return err
		}
		return s.schdPending(ctx, &pending)(tx)
	})
	if err != nil {
		return nil, err
	}
	return &controlv1.RepublishResponse{Republish: schdRepublish(job, pending), AlreadyRunning: existing,
		DryRun: req.GetDryRun(), UnknownFlid: unknown}, nil
}

// maxUnknownFLIDs bounds the unknown FLIDs a dry run of Republish names; it counts them all.
const maxUnknownFLIDs = 100

// countRepublish counts what the republish job would walk, as the backfill counts it when it
// starts the job (total), and for named FLIDs those the current state does not hold (unknown),
// returning the first maxUnknownFLIDs of them.
func (s *Service) countRepublish(ctx context.Context, tx pgx.Tx, job *jobs.RepublishJob) ([]string, error) {
	if job.All() {
		var err error
		job.Total, err = flightstore.Count(ctx, tx)
		return nil, err
	}
	unknown, err := flightstore.Unknown(ctx, tx, job.FLIDs)
	if err != nil {
		return nil, err
	}
	slices.Sort(unknown)
	job.Total, job.Unknown = int64(len(job.FLIDs)), int64(len(unknown))
	return unknown[:min(len(unknown), maxUnknownFLIDs)], nil
}

// GetRepublish implements ControlService.GetRepublish, with the KAFKA:schd rows still unsent.
func (s *Service) GetRepublish(ctx context.Context, req *controlv1.GetRepublishRequest) (*controlv1.GetRepublishResponse, error) {
	var pending int64
	job, err := getJob(ctx, s, "get republish", jobs.Republishes, req.GetRepublishId(), s.schdPending(ctx, &pending))
	if err != nil {
		return nil, err
	}
	return &controlv1.GetRepublishResponse{Republish: schdRepublish(job, pending)}, nil
}

// ListRepublishes implements ControlService.ListRepublishes, newest first (the page token
// holds the last republish_id of the page).
func (s *Service) ListRepublishes(ctx context.Context, req *controlv1.ListRepublishesRequest) (*controlv1.ListRepublishesResponse, error) {
	var pending int64
	page, next, err := listJobs(ctx, s, "list republishes", jobs.Republishes, req.GetPageToken(), req.GetPageSize(), s.schdPending(ctx, &pending),
		func(j jobs.RepublishJob) *controlv1.SchdRepublish { return schdRepublish(j, pending) })
	if err != nil {
		return nil, err
	}
	return &controlv1.ListRepublishesResponse{Republishes: page, NextPageToken: next}, nil
}

// CancelRepublish implements ControlService.CancelRepublish; its dry run answers the republish
// as the cancel would leave it.
func (s *Service) CancelRepublish(ctx context.Context, req *controlv1.CancelRepublishRequest) (*controlv1.CancelRepublishResponse, error) {
	job, err := cancelJob(ctx, s, "cancel republish", jobs.Republishes, req.GetRepublishId(), req.GetComment(), req.GetDryRun())
	if err != nil {
		return nil, err
	}
	return &controlv1.CancelRepublishResponse{Republish: schdRepublish(job, 0), DryRun: req.GetDryRun()}, nil
}

// schdPending reads into n the number of KAFKA:schd outbox rows not sent yet (PENDING), what a
// republish still has on its way to the broker.
func (s *Service) schdPending(ctx context.Context, n *int64) func(tx pgx.Tx) error {
	return func(tx pgx.Tx) error {
		stats, err := outbox.Stats(ctx, tx, s.cfg.Clock.Now())
		if err != nil {
			return err
		}
		*n = stats[outbox.TargetSchd].Pending
		return nil
	}
}

// schdRepublish converts a job with the outbox's unsent KAFKA:schd rows (0 when not read).
func schdRepublish(j jobs.RepublishJob, pending int64) *controlv1.SchdRepublish {
	return &controlv1.SchdRepublish{
		RepublishId:       j.ID,
		All:               j.All(),
		Flid:              j.FLIDs,
		FlidCount:         j.FLIDCount,
		State:             controlv1.RebuildState(controlv1.RebuildState_value[rebuildStatePrefix+j.State]),
		Done:              j.Done,
		Total:             j.Total,
		Unknown:           j.Unknown,
		OutboxPending:     pending,
		RequestedBy:       j.RequestedBy,
		Comment:           j.Comment,
		CancelRequested:   j.CancelRequested,
		Error:             j.Error,
		RequestedAt:       timestamp(j.RequestedAt),
		StartedAt:         optTimestamp(j.StartedAt),
		FinishedAt:        optTimestamp(j.FinishedAt),
		UpdatedAt:         timestamp(j.UpdatedAt),
		CancelledBy:       j.CancelledBy,
		CancelComment:     j.CancelComment,
		CancelRequestedAt: optTimestamp(j.CancelRequestedAt),
	}
}
