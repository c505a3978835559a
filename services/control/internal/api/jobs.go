package api

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/msgexchange/msgexchange/pkg/jobs"
)

// The calls of the jobs the backfill role runs (RebuildProjection and Republish, their Get, List
// and Cancel) share these: a job's rows are pkg/jobs', whichever table holds them.

// writeJob runs fn on the control role's lock connection and answers refused, the job
// package's refusal of the call (ErrInvalid of a scope, ErrFinished of a job that ended), with
// code; what names the call in the status.
func (s *Service) writeJob(ctx context.Context, what string, refused error, code codes.Code, fn func(tx pgx.Tx) error) error {
	err := s.write(ctx, fn)
	if errors.Is(err, refused) {
		return status.Errorf(code, "%s: %v", what, err)
	}
	if err != nil {
		return s.writeStatus(ctx, what, err)
	}
	return nil
}

// cancelJob cancels job id of table (jobs.Table.Cancel): FailedPrecondition for a job that
// already ended.
func cancelJob[J any](ctx context.Context, s *Service, what string, table *jobs.Table[J], id int64) (J, error) {
	var job J
	err := s.writeJob(ctx, what, table.Finished, codes.FailedPrecondition, func(tx pgx.Tx) error {
		var err error
		job, err = table.Cancel(ctx, tx, id, s.cfg.Clock.Now())
		return err
	})
	return job, err
}

// pageOf cuts list, read with one job more than size (the sign of a next page), to a page of
// table's jobs, and returns the token of the next page ("" for the last).
func pageOf[J any](table *jobs.Table[J], list []J, size int) ([]J, string) {
	if len(list) <= size {
		return list, ""
	}
	list = list[:size]
	return list, encodePageToken(table.Row(&list[size-1]).ID)
}
