package rebuild

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

const columns = `rebuild_id, flids, dry_run, state, phase, cursor, done, total,
	missing, stale, content, extra, repaired, requested_by, comment, cancel_requested, error,
	requested_at, started_at, finished_at, updated_at`

func scan(row pgx.Row) (Job, error) {
	var j Job
	c := &j.Counts
	err := row.Scan(&j.ID, &j.FLIDs, &j.DryRun, &j.State, &j.Phase, &j.Cursor, &j.Done, &j.Total,
		&c.Missing, &c.Stale, &c.Content, &c.Extra, &c.Repaired, &j.RequestedBy, &j.Comment, &j.CancelRequested, &j.Error,
		&j.RequestedAt, &j.StartedAt, &j.FinishedAt, &j.UpdatedAt)
	return j, err
}

// Request registers a job for spec, or returns the open one (existing true) when a job is
// already pending or running: one job at a time, and asking twice is harmless. The open job
// may have another scope or dry_run than spec; the caller reports which one it got.
func Request(ctx context.Context, q db.Executor, spec Spec, now time.Time) (job Job, existing bool, err error) {
	if spec, err = spec.Normalize(); err != nil {
		return Job{}, false, err
	}
	var flids []string
	if len(spec.FLIDs) > 0 {
		flids = spec.FLIDs
	}
	job, err = scan(q.QueryRow(ctx, `INSERT INTO projection_rebuild (flids, dry_run, requested_by, comment, requested_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $5)
		ON CONFLICT ((true)) WHERE state IN ('PENDING', 'RUNNING') DO NOTHING
		RETURNING `+columns, flids, spec.DryRun, spec.RequestedBy, spec.Comment, now.UTC()))
	if err == nil {
		return job, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Job{}, false, fmt.Errorf("request projection rebuild: %w", err)
	}
	job, err = scan(q.QueryRow(ctx, `SELECT `+columns+` FROM projection_rebuild WHERE state IN ('PENDING', 'RUNNING')`))
	if errors.Is(err, pgx.ErrNoRows) {
		// The open job ended between the insert and the read: the caller asks again.
		return Job{}, false, fmt.Errorf("request projection rebuild: the open job ended meanwhile; try again")
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("read the open projection rebuild: %w", err)
	}
	return job, true, nil
}

// Get returns one job, or ErrNotFound.
func Get(ctx context.Context, q db.Executor, id int64) (Job, error) {
	j, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM projection_rebuild WHERE rebuild_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, fmt.Errorf("projection rebuild %d: %w", id, errors.Join(ErrNotFound, db.ErrNotFound))
	}
	if err != nil {
		return Job{}, fmt.Errorf("read projection rebuild %d: %w", id, err)
	}
	return j, nil
}

// List returns up to limit jobs, newest first, with an ID below before (0: from the newest).
func List(ctx context.Context, q db.Executor, before int64, limit int) ([]Job, error) {
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM projection_rebuild
		WHERE $1 = 0 OR rebuild_id < $1 ORDER BY rebuild_id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list projection rebuilds: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list projection rebuilds: %w", err)
	}
	return jobs, nil
}

// LockOpen returns the open job locked for the caller's transaction (FOR UPDATE), or nil.
func LockOpen(ctx context.Context, q db.Executor) (*Job, error) {
	j, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM projection_rebuild
		WHERE state IN ('PENDING', 'RUNNING') FOR UPDATE`))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock the open projection rebuild: %w", err)
	}
	return &j, nil
}

// Start marks a pending job RUNNING with the number of flights it will compare.
func Start(ctx context.Context, q db.Executor, id, total int64, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE projection_rebuild SET state = 'RUNNING', total = $2, started_at = $3, updated_at = $3, error = ''
		WHERE rebuild_id = $1 AND state = 'PENDING'`, id, total, now.UTC())
	if err != nil {
		return fmt.Errorf("start projection rebuild %d: %w", id, err)
	}
	return nil
}

// Progress is what one step of a job did.
type Progress struct {
	Phase, Cursor string
	// Done is how many more flights were compared.
	Done   int64
	Counts Counts
}

// Advance records a step: the new phase and cursor, and the flights and drift it added.
func Advance(ctx context.Context, q db.Executor, id int64, p Progress, now time.Time) error {
	c := p.Counts
	_, err := q.Exec(ctx, `UPDATE projection_rebuild SET phase = $2, cursor = $3, done = done + $4,
		missing = missing + $5, stale = stale + $6, content = content + $7, extra = extra + $8, repaired = repaired + $9,
		error = '', updated_at = $10
		WHERE rebuild_id = $1 AND state = 'RUNNING'`,
		id, p.Phase, p.Cursor, p.Done, c.Missing, c.Stale, c.Content, c.Extra, c.Repaired, now.UTC())
	if err != nil {
		return fmt.Errorf("advance projection rebuild %d: %w", id, err)
	}
	return nil
}

// Finish ends an open job in state (StateDone or StateCancelled).
func Finish(ctx context.Context, q db.Executor, id int64, state string, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE projection_rebuild SET state = $2, finished_at = $3, updated_at = $3, error = ''
		WHERE rebuild_id = $1 AND state IN ('PENDING', 'RUNNING')`, id, state, now.UTC())
	if err != nil {
		return fmt.Errorf("finish projection rebuild %d: %w", id, err)
	}
	return nil
}

// NoteError records the failure of a step on an open job; the step is tried again.
func NoteError(ctx context.Context, q db.Executor, id int64, cause error, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE projection_rebuild SET error = $2, updated_at = $3
		WHERE rebuild_id = $1 AND state IN ('PENDING', 'RUNNING')`, id, cause.Error(), now.UTC())
	if err != nil {
		return fmt.Errorf("note the error of projection rebuild %d: %w", id, err)
	}
	return nil
}

// Cancel stops a job: a pending one is CANCELLED at once, a running one at its next step (the
// backfill finishes the page it is on). ErrFinished for a job that already ended.
func Cancel(ctx context.Context, q db.Executor, id int64, now time.Time) (Job, error) {
	j, err := scan(q.QueryRow(ctx, `UPDATE projection_rebuild SET
			state = CASE WHEN state = 'PENDING' THEN 'CANCELLED' ELSE state END,
			finished_at = CASE WHEN state = 'PENDING' THEN $2 ELSE finished_at END,
			cancel_requested = true, updated_at = $2
		WHERE rebuild_id = $1 AND state IN ('PENDING', 'RUNNING')
		RETURNING `+columns, id, now.UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := Get(ctx, q, id); gerr != nil {
			return Job{}, gerr
		}
		return Job{}, fmt.Errorf("cancel projection rebuild %d: %w", id, ErrFinished)
	}
	if err != nil {
		return Job{}, fmt.Errorf("cancel projection rebuild %d: %w", id, err)
	}
	return j, nil
}
