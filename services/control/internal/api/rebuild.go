package api

import (
	"context"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"

	"github.com/msgexchange/msgexchange/pkg/jobs"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// RebuildProjection implements ControlService.RebuildProjection: it registers the job in
// projection_rebuild on the control role's lock connection; the backfill role executes it. A
// job already open is returned instead (already_running), so asking twice never runs two.
func (s *Service) RebuildProjection(ctx context.Context, req *controlv1.RebuildProjectionRequest) (*controlv1.RebuildProjectionResponse, error) {
	spec := jobs.RebuildSpec{FLIDs: req.GetFlid(), DryRun: req.GetDryRun(), RequestedBy: s.caller(ctx), Comment: req.GetComment()}
	var (
		job      jobs.RebuildJob
		existing bool
	)
	err := s.writeJob(ctx, "rebuild projection", jobs.ErrRebuildInvalid, codes.InvalidArgument, func(tx pgx.Tx) error {
		var err error
		job, existing, err = jobs.RequestRebuild(ctx, tx, spec, s.cfg.Clock.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return &controlv1.RebuildProjectionResponse{Rebuild: projectionRebuild(job), AlreadyRunning: existing}, nil
}

// GetProjectionRebuild implements ControlService.GetProjectionRebuild.
func (s *Service) GetProjectionRebuild(ctx context.Context, req *controlv1.GetProjectionRebuildRequest) (*controlv1.GetProjectionRebuildResponse, error) {
	job, err := getJob(ctx, s, "get projection rebuild", jobs.Rebuilds, req.GetRebuildId(), nil)
	if err != nil {
		return nil, err
	}
	return &controlv1.GetProjectionRebuildResponse{Rebuild: projectionRebuild(job)}, nil
}

// ListProjectionRebuilds implements ControlService.ListProjectionRebuilds, newest first (the
// page token holds the last rebuild_id of the page).
func (s *Service) ListProjectionRebuilds(ctx context.Context, req *controlv1.ListProjectionRebuildsRequest) (*controlv1.ListProjectionRebuildsResponse, error) {
	page, next, err := listJobs(ctx, s, "list projection rebuilds", jobs.Rebuilds, req.GetPageToken(), req.GetPageSize(), nil, projectionRebuild)
	if err != nil {
		return nil, err
	}
	return &controlv1.ListProjectionRebuildsResponse{Rebuilds: page, NextPageToken: next}, nil
}

// CancelProjectionRebuild implements ControlService.CancelProjectionRebuild; its dry run answers
// the rebuild as the cancel would leave it.
func (s *Service) CancelProjectionRebuild(ctx context.Context, req *controlv1.CancelProjectionRebuildRequest) (*controlv1.CancelProjectionRebuildResponse, error) {
	job, err := cancelJob(ctx, s, "cancel projection rebuild", jobs.Rebuilds, req.GetRebuildId(), req.GetComment(), req.GetDryRun())
	if err != nil {
		return nil, err
	}
	return &controlv1.CancelProjectionRebuildResponse{Rebuild: projectionRebuild(job), DryRun: req.GetDryRun()}, nil
}

// caller names who made the call, for the rows that keep it.
func (s *Service) caller(ctx context.Context) string {
	if s.cfg.Caller != nil {
		if c := s.cfg.Caller(ctx); c != "" {
			return c
		}
	}
	return "unknown"
}

const rebuildStatePrefix = "REBUILD_STATE_"

func projectionRebuild(j jobs.RebuildJob) *controlv1.ProjectionRebuild {
	return &controlv1.ProjectionRebuild{
		RebuildId:         j.ID,
		All:               j.All(),
		Flid:              j.FLIDs,
		FlidCount:         j.FLIDCount,
		DryRun:            j.DryRun,
		State:             controlv1.RebuildState(controlv1.RebuildState_value[rebuildStatePrefix+j.State]),
		Phase:             j.Phase,
		Done:              j.Done,
		Total:             j.Total,
		Missing:           j.Counts.Missing,
		Stale:             j.Counts.Stale,
		Content:           j.Counts.Content,
		Extra:             j.Counts.Extra,
		Repaired:          j.Counts.Repaired,
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
