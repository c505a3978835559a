// Package jobrun executes the jobs the control API requests of the backfill role (pkg/jobs): the
// projection rebuilds (the sentinel) and the republishes (the republisher). A job runs one step
// at a time, each step one transaction on the role's lock connection that locks the job row
// (jobs.Table.LockOpen), does one page and records the job's progress with it; so a crash or a
// failover loses at most the step in flight, which the next holder of the role does again. The
// first step of a job starts it with the number of flights it will do, and a job an operator
// cancelled ends at its next step.
package jobrun

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/jobs"
)

// Work is what one kind of job does.
type Work[J any] struct {
	// Started returns what the log of a job's start names beside its ID, its scope and its total
	// (dry_run for a rebuild); nil for nothing.
	Started func(*J) []any
	// Step does one step of a running job in tx (the job row locked, not cancelled) and reports
	// whether the job goes on; it records the progress and, at the job's end, finishes it.
	Step func(ctx context.Context, tx pgx.Tx, job *J) (more bool, err error)
}

// Runner executes the open job of one table.
type Runner[J any] struct {
	table  *jobs.Table[J]
	work   Work[J]
	clock  clock.Clock
	logger *slog.Logger
}

// New builds a runner of table's jobs.
func New[J any](table *jobs.Table[J], work Work[J], clk clock.Clock, logger *slog.Logger) *Runner[J] {
	return &Runner[J]{table: table, work: work, clock: clk, logger: logger}
}

// Run polls for a requested job every poll and executes it (Poll), until ctx ends.
func (r *Runner[J]) Run(ctx context.Context, sess db.Txer, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			r.Poll(ctx, sess)
		}
	}
}

// Poll is RunJobs with its failure logged: the job keeps the error and the next poll resumes it.
func (r *Runner[J]) Poll(ctx context.Context, sess db.Txer) {
	if err := r.RunJobs(ctx, sess); err != nil && ctx.Err() == nil {
		r.logger.Error(r.table.Noun+" step failed; tried again at the next poll", "err", err)
	}
}

// RunJobs executes the open job, if any, to its end. It returns when there is no open job, or
// with the error of a step (recorded on the job, which the next call resumes).
func (r *Runner[J]) RunJobs(ctx context.Context, sess db.Txer) error {
	for {
		id, more, err := r.Step(ctx, sess)
		if err != nil {
			if id != 0 && ctx.Err() == nil {
				if nerr := sess.Tx(ctx, func(tx pgx.Tx) error { return r.table.NoteError(ctx, tx, id, err, r.clock.Now()) }); nerr != nil {
					r.logger.Warn(r.table.Noun+": could not record the step's error", r.table.Key, id, "err", nerr)
				}
			}
			return err
		}
		if !more {
			return nil
		}
	}
}

// Step does one step of the open job: it returns the job's ID (0 without an open job) and
// whether the job goes on.
func (r *Runner[J]) Step(ctx context.Context, sess db.Txer) (id int64, more bool, err error) {
	err = sess.Tx(ctx, func(tx pgx.Tx) error {
		job, err := r.table.LockOpen(ctx, tx)
		if err != nil || job == nil {
			return err
		}
		id = r.table.Row(job).ID
		more, err = r.step(ctx, tx, job)
		return err
	})
	if err != nil {
		return id, false, fmt.Errorf("%s %d: %w", r.table.Noun, id, err)
	}
	return id, more, nil
}

func (r *Runner[J]) step(ctx context.Context, tx pgx.Tx, job *J) (bool, error) {
	now, row := r.clock.Now(), r.table.Row(job)
	switch {
	case row.CancelRequested:
		r.logger.Info(r.table.Noun+" cancelled", r.table.Key, row.ID, "done", row.Done, "total", row.Total)
		return false, r.table.Finish(ctx, tx, row.ID, jobs.StateCancelled, now)
	case row.State == jobs.StatePending:
		total := int64(len(row.FLIDs))
		if row.All() {
			var err error
			if total, err = flightstore.Count(ctx, tx); err != nil {
				return false, err
			}
		}
		attrs := []any{r.table.Key, row.ID, "all", row.All()}
		if r.work.Started != nil {
			attrs = append(attrs, r.work.Started(job)...)
		}
		r.logger.Info(r.table.Noun+" started", append(attrs, "total", total, "requested_by", row.RequestedBy)...)
		return true, r.table.Start(ctx, tx, row.ID, total, now)
	}
	return r.work.Step(ctx, tx, job)
}
