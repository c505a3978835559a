package api

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/msgexchange/msgexchange/pkg/db"
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

// cancelJob cancels job id of table (jobs.Table.Cancel), keeping the caller and comment on the
// row, or with dryRun answers the job as the cancel would leave it (jobs.Table.PreviewCancel):
// FailedPrecondition for a job that already ended, either way.
func cancelJob[J any](ctx context.Context, s *Service, what string, table *jobs.Table[J], id int64, comment string, dryRun bool) (J, error) {
	var job J
	c := jobs.Cancellation{By: s.caller(ctx), Comment: strings.TrimSpace(comment)}
	err := s.writeJob(ctx, what, table.Finished, codes.FailedPrecondition, func(tx pgx.Tx) error {
		var err error
		if dryRun {
			job, err = table.PreviewCancel(ctx, tx, id, c, s.cfg.Clock.Now())
		} else {
			job, err = table.Cancel(ctx, tx, id, c, s.cfg.Clock.Now())
		}
		return err
	})
	return job, err
}

// getJob reads job id of table, and then what also reads in the same transaction (nil for
// nothing).
func getJob[J any](ctx context.Context, s *Service, what string, table *jobs.Table[J], id int64, also func(tx pgx.Tx) error) (J, error) {
	job, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) (J, error) {
		job, err := table.Get(ctx, tx, id)
		if err != nil || also == nil {
			return job, err
		}
		return job, also(tx)
	})
	if err != nil {
		return job, toStatus(ctx, what, err)
	}
	return job, nil
}

// listJobs reads a page of table's jobs, newest first (the page token holds the last ID of the
// page before), without their scopes' FLIDs (jobs.Table.List), and then what also reads in the
// same transaction (nil for nothing); it returns the page as conv converts the jobs, within
// control.page-bytes, and the token of the next page ("" for the last).
func listJobs[J any, M proto.Message](ctx context.Context, s *Service, what string, table *jobs.Table[J], token string, size int32,
	also func(tx pgx.Tx) error, conv func(J) M) ([]M, string, error) {
	before, n, err := page(token, size)
	if err != nil {
		return nil, "", err
	}
	// One job more than the page tells whether a next page exists.
	list, err := db.TxV(ctx, reader{s}, func(tx pgx.Tx) ([]J, error) {
		list, err := table.List(ctx, tx, before, n+1)
		if err != nil || also == nil {
			return list, err
		}
		return list, also(tx)
	})
	if err != nil {
		return nil, "", toStatus(ctx, what, err)
	}
	more := len(list) > n
	if more {
		list = list[:n]
	}
	out := make([]M, 0, len(list))
	for _, j := range list {
		out = append(out, conv(j))
	}
	out, cut := fitPage(out, s.cfg.PageBytes)
	if !more && !cut {
		return out, "", nil
	}
	return out, encodePageToken(table.Row(&list[len(out)-1]).ID), nil
}
