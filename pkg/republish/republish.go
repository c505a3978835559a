// Package republish stores the jobs that send the current state of flights to KAFKA:schd again
// (schd_republish; docs/operations.md, "Kafka topic lost / consumer needs a full reload"). The
// control API requests a job, the backfill role executes it a page at a time and records its
// progress here in the same transaction as each page, so a job resumes from its cursor after a
// crash or a failover, and a job run twice only sends duplicates.
package republish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// The states of a job.
const (
	// StatePending: requested, not yet picked up by the backfill role.
	StatePending = "PENDING"
	// StateRunning: being executed (or waiting for the backfill role to come back).
	StateRunning = "RUNNING"
	// StateDone: every flight of the scope written to the outbox.
	StateDone = "DONE"
	// StateCancelled: stopped by an operator; what it wrote until then is still sent.
	StateCancelled = "CANCELLED"
)

// MaxFLIDs bounds the FLIDs one job names; a larger selection is the whole current state.
const MaxFLIDs = 10000

// ErrNotFound is returned for a job ID that does not exist.
var ErrNotFound = errors.New("republish: no such job")

// ErrFinished is returned by Cancel for a job that already ended.
var ErrFinished = errors.New("republish: the job has already ended")

// ErrInvalid is returned by Request for a scope it refuses.
var ErrInvalid = errors.New("republish: invalid request")

// Spec is what an operator asks for.
type Spec struct {
	// FLIDs limits the job to these flights; empty means every flight of the current state.
	FLIDs       []string
	RequestedBy string
	Comment     string
}

// Normalize returns the spec with its FLIDs sorted and unique (the order the job walks them
// in), or ErrInvalid.
func (s Spec) Normalize() (Spec, error) {
	if len(s.FLIDs) > MaxFLIDs {
		return s, fmt.Errorf("%w: %d FLIDs, at most %d (republish every flight instead)", ErrInvalid, len(s.FLIDs), MaxFLIDs)
	}
	flids := slices.Clone(s.FLIDs)
	for _, f := range flids {
		if f == "" {
			return s, fmt.Errorf("%w: an empty FLID", ErrInvalid)
		}
	}
	slices.Sort(flids)
	s.FLIDs = slices.Compact(flids)
	return s, nil
}

// Job is one schd_republish row.
type Job struct {
	ID int64
	// FLIDs is the scope; nil for every flight of the current state.
	FLIDs  []string
	State  string
	Cursor string
	// Done of Total flights written to the outbox; Unknown FLIDs of the scope had no state.
	Done, Total, Unknown int64
	RequestedBy          string
	Comment              string
	CancelRequested      bool
	// Error is the last failure of a step; cleared by the next step that succeeds.
	Error       string
	RequestedAt time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	UpdatedAt   time.Time
}

// All reports whether the job covers every flight of the current state.
func (j Job) All() bool { return j.FLIDs == nil }

// NextFLIDs returns up to n FLIDs of a scoped job after the cursor (its FLIDs are sorted).
func (j Job) NextFLIDs(n int) []string {
	i, _ := slices.BinarySearch(j.FLIDs, j.Cursor)
	if i < len(j.FLIDs) && j.FLIDs[i] == j.Cursor {
		i++
	}
	return j.FLIDs[i:min(i+n, len(j.FLIDs))]
}

const columns = `republish_id, flids, state, cursor, done, total, unknown, requested_by, comment,
	cancel_requested, error, requested_at, started_at, finished_at, updated_at`

func scan(row pgx.Row) (Job, error) {
	var j Job
	err := row.Scan(&j.ID, &j.FLIDs, &j.State, &j.Cursor, &j.Done, &j.Total, &j.Unknown, &j.RequestedBy, &j.Comment,
		&j.CancelRequested, &j.Error, &j.RequestedAt, &j.StartedAt, &j.FinishedAt, &j.UpdatedAt)
	return j, err
}

// Request registers a job for spec, or returns the open one (existing true) when a job is
// already pending or running: one job at a time, and asking twice is harmless. The open job
// may have another scope than spec; the caller reports which one it got.
func Request(ctx context.Context, q db.Executor, spec Spec, now time.Time) (job Job, existing bool, err error) {
	if spec, err = spec.Normalize(); err != nil {
		return Job{}, false, err
	}
	var flids []string
	if len(spec.FLIDs) > 0 {
		flids = spec.FLIDs
	}
	job, err = scan(q.QueryRow(ctx, `INSERT INTO schd_republish (flids, requested_by, comment, requested_at, updated_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT ((true)) WHERE state IN ('PENDING', 'RUNNING') DO NOTHING
		RETURNING `+columns, flids, spec.RequestedBy, spec.Comment, now.UTC()))
	if err == nil {
		return job, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Job{}, false, fmt.Errorf("request republish: %w", err)
	}
	job, err = scan(q.QueryRow(ctx, `SELECT `+columns+` FROM schd_republish WHERE state IN ('PENDING', 'RUNNING')`))
	if errors.Is(err, pgx.ErrNoRows) {
		// The open job ended between the insert and the read: the caller asks again.
		return Job{}, false, fmt.Errorf("request republish: the open job ended meanwhile; try again")
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("read the open republish: %w", err)
	}
	return job, true, nil
}

// Get returns one job, or ErrNotFound.
func Get(ctx context.Context, q db.Executor, id int64) (Job, error) {
	j, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM schd_republish WHERE republish_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, fmt.Errorf("republish %d: %w", id, errors.Join(ErrNotFound, db.ErrNotFound))
	}
	if err != nil {
		return Job{}, fmt.Errorf("read republish %d: %w", id, err)
	}
	return j, nil
}

// List returns up to limit jobs, newest first, with an ID below before (0: from the newest).
func List(ctx context.Context, q db.Executor, before int64, limit int) ([]Job, error) {
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM schd_republish
		WHERE $1 = 0 OR republish_id < $1 ORDER BY republish_id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list republishes: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list republishes: %w", err)
	}
	return jobs, nil
}

// LockOpen returns the open job locked for the caller's transaction (FOR UPDATE), or nil.
func LockOpen(ctx context.Context, q db.Executor) (*Job, error) {
	j, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM schd_republish
		WHERE state IN ('PENDING', 'RUNNING') FOR UPDATE`))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock the open republish: %w", err)
	}
	return &j, nil
}

// Start marks a pending job RUNNING with the number of flights it will write.
func Start(ctx context.Context, q db.Executor, id, total int64, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE schd_republish SET state = 'RUNNING', total = $2, started_at = $3, updated_at = $3, error = ''
		WHERE republish_id = $1 AND state = 'PENDING'`, id, total, now.UTC())
	if err != nil {
		return fmt.Errorf("start republish %d: %w", id, err)
	}
	return nil
}

// Progress is what one step of a job did.
type Progress struct {
	Cursor string
	// Done is how many more flights were written, Unknown how many FLIDs had no state.
	Done, Unknown int64
}

// Advance records a step: the new cursor and the flights it added.
func Advance(ctx context.Context, q db.Executor, id int64, p Progress, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE schd_republish SET cursor = $2, done = done + $3, unknown = unknown + $4,
		error = '', updated_at = $5
		WHERE republish_id = $1 AND state = 'RUNNING'`, id, p.Cursor, p.Done, p.Unknown, now.UTC())
	if err != nil {
		return fmt.Errorf("advance republish %d: %w", id, err)
	}
	return nil
}

// Finish ends an open job in state (StateDone or StateCancelled).
func Finish(ctx context.Context, q db.Executor, id int64, state string, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE schd_republish SET state = $2, finished_at = $3, updated_at = $3, error = ''
		WHERE republish_id = $1 AND state IN ('PENDING', 'RUNNING')`, id, state, now.UTC())
	if err != nil {
		return fmt.Errorf("finish republish %d: %w", id, err)
	}
	return nil
}

// NoteError records the failure of a step on an open job; the step is tried again.
func NoteError(ctx context.Context, q db.Executor, id int64, cause error, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE schd_republish SET error = $2, updated_at = $3
		WHERE republish_id = $1 AND state IN ('PENDING', 'RUNNING')`, id, cause.Error(), now.UTC())
	if err != nil {
		return fmt.Errorf("note the error of republish %d: %w", id, err)
	}
	return nil
}

// Cancel stops a job: a pending one is CANCELLED at once, a running one at its next step (the
// backfill finishes the page it is on). ErrFinished for a job that already ended.
func Cancel(ctx context.Context, q db.Executor, id int64, now time.Time) (Job, error) {
	j, err := scan(q.QueryRow(ctx, `UPDATE schd_republish SET
			state = CASE WHEN state = 'PENDING' THEN 'CANCELLED' ELSE state END,
			finished_at = CASE WHEN state = 'PENDING' THEN $2 ELSE finished_at END,
			cancel_requested = true, updated_at = $2
		WHERE republish_id = $1 AND state IN ('PENDING', 'RUNNING')
		RETURNING `+columns, id, now.UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := Get(ctx, q, id); gerr != nil {
			return Job{}, gerr
		}
		return Job{}, fmt.Errorf("cancel republish %d: %w", id, ErrFinished)
	}
	if err != nil {
		return Job{}, fmt.Errorf("cancel republish %d: %w", id, err)
	}
	return j, nil
}
