// Package jobs stores the jobs the control API requests and the backfill role executes a page at
// a time: the projection rebuilds (projection_rebuild, Rebuilds, rebuild.go) and the republishes
// (schd_republish, Republishes, republish.go). The two tables share their shape: a scope of
// FLIDs, a state, a cursor, the flights done of a total, who asked and the last error, and at
// most one open job (a unique index over the open rows). Table holds their statements once;
// each kind of job names its table, its own columns and its errors, prefixed with its kind
// (RebuildSpec, ErrRepublishInvalid) since both live in this package.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// StateDone: every flight of the scope done.
	StateDone = "DONE"
	// StateCancelled: stopped by an operator; what the job did until then stays done.
	StateCancelled = "CANCELLED"
)

// MaxFLIDs bounds the FLIDs one job names; a larger selection is every flight.
const MaxFLIDs = 10000

// NormalizeFLIDs returns flids sorted and unique (the order a job walks them in), or an error
// wrapping invalid; instead says what to ask for when there are too many.
func NormalizeFLIDs(flids []string, invalid error, instead string) ([]string, error) {
	if len(flids) > MaxFLIDs {
		return flids, fmt.Errorf("%w: %d FLIDs, at most %d (%s instead)", invalid, len(flids), MaxFLIDs, instead)
	}
	out := slices.Clone(flids)
	for _, f := range out {
		if f == "" {
			return flids, fmt.Errorf("%w: an empty FLID", invalid)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Row is what every job row holds.
type Row struct {
	ID int64
	// FLIDs is the scope; nil for every flight. List leaves a scope's FLIDs out (an empty,
	// non-nil slice): a page of jobs stays small whatever their scopes (docs/control.md).
	FLIDs []string
	// FLIDCount is how many FLIDs the scope names (0 for every flight), also in List.
	FLIDCount int64
	State     string
	Cursor    string
	// Done of Total flights.
	Done, Total     int64
	RequestedBy     string
	Comment         string
	CancelRequested bool
	// Error is the last failure of a step; cleared by the next step that succeeds.
	Error       string
	RequestedAt time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	UpdatedAt   time.Time
	// CancelledBy, CancelComment and CancelRequestedAt are who asked to cancel the job, why and
	// when (the first cancel; empty and nil while none was asked for).
	CancelledBy, CancelComment string
	CancelRequestedAt          *time.Time
}

// All reports whether the job covers every flight.
func (r Row) All() bool { return r.FLIDs == nil }

// Open reports whether the job is still to run or running (PENDING or RUNNING).
func (r Row) Open() bool { return r.State == StatePending || r.State == StateRunning }

// NextFLIDs returns up to n FLIDs of a scoped job after the cursor (its FLIDs are sorted).
func (r Row) NextFLIDs(n int) []string {
	i, _ := slices.BinarySearch(r.FLIDs, r.Cursor)
	if i < len(r.FLIDs) && r.FLIDs[i] == r.Cursor {
		i++
	}
	return r.FLIDs[i:min(i+n, len(r.FLIDs))]
}

// The columns of Row, in the order scan reads them, after the table's key column and the scope
// (scopeColumns or listScopeColumns).
const rowColumns = `state, cursor, done, total, requested_by, comment, cancel_requested, error,
	requested_at, started_at, finished_at, updated_at, cancelled_by, cancel_comment, cancel_requested_at`

// The scope as the reads of one job read it (its FLIDs and their count), and as List reads it:
// an empty array for a scope, so Row.All still tells, without its up to MaxFLIDs FLIDs (ten
// jobs of 10,000 FLIDs made one page 9.2 MB, issue #57).
const (
	scopeColumns     = `flids, coalesce(cardinality(flids), 0)`
	listScopeColumns = `CASE WHEN flids IS NOT NULL THEN '{}'::text[] END, coalesce(cardinality(flids), 0)`
)

// Table is one job table, its jobs of type J (a struct embedding Row).
type Table[J any] struct {
	// Name is the table, Key its ID column.
	Name, Key string
	// Noun is what the errors call one job ("projection rebuild"), Plural several.
	Noun, Plural string
	// Extra are the table's own columns, read after Row's in this order; a request sets
	// Options of them (Spec.Options), a step sets Set and adds to Add (Step.Set, Step.Add).
	Extra, Options, Set, Add []string
	// Fields returns the Row of a job and the pointers its Extra columns are read into.
	Fields func(*J) (*Row, []any)
	// NotFound is wrapped by Get for an ID without a row, Finished by Cancel for a job that
	// already ended.
	NotFound, Finished error
}

// Row returns the Row of job.
func (t *Table[J]) Row(job *J) *Row {
	r, _ := t.Fields(job)
	return r
}

func (t *Table[J]) columns() string { return t.columnsWith(scopeColumns) }

func (t *Table[J]) columnsWith(scope string) string {
	return strings.Join(append([]string{t.Key, scope, rowColumns}, t.Extra...), ", ")
}

func (t *Table[J]) scan(row pgx.Row) (J, error) {
	var j J
	r, extra := t.Fields(&j)
	dest := []any{&r.ID, &r.FLIDs, &r.FLIDCount, &r.State, &r.Cursor, &r.Done, &r.Total, &r.RequestedBy, &r.Comment,
		&r.CancelRequested, &r.Error, &r.RequestedAt, &r.StartedAt, &r.FinishedAt, &r.UpdatedAt,
		&r.CancelledBy, &r.CancelComment, &r.CancelRequestedAt}
	err := row.Scan(append(dest, extra...)...)
	return j, err
}

// Spec is what an operator asks for.
type Spec struct {
	// FLIDs limits the job to these flights (normalized); empty means every flight.
	FLIDs       []string
	RequestedBy string
	Comment     string
	// Options are the values of the table's Options columns, in their order.
	Options []any
}

// Request registers a job for spec, or returns the open one (existing true) when a job is
// already pending or running: one job at a time, and asking twice is harmless. The open job
// may have another scope or options than spec; the caller reports which one it got.
func (t *Table[J]) Request(ctx context.Context, q db.Executor, spec Spec, now time.Time) (job J, existing bool, err error) {
	var flids []string
	if len(spec.FLIDs) > 0 {
		flids = spec.FLIDs
	}
	cols := append([]string{"flids", "requested_by", "comment", "requested_at", "updated_at"}, t.Options...)
	args := append([]any{flids, spec.RequestedBy, spec.Comment, now.UTC()}, spec.Options...)
	params := []string{"$1", "$2", "$3", "$4", "$4"}
	for i := range spec.Options {
		params = append(params, "$"+strconv.Itoa(5+i))
	}
	job, err = t.scan(q.QueryRow(ctx, `INSERT INTO `+t.Name+` (`+strings.Join(cols, ", ")+`)
		VALUES (`+strings.Join(params, ", ")+`)
		ON CONFLICT ((true)) WHERE state IN ('PENDING', 'RUNNING') DO NOTHING
		RETURNING `+t.columns(), args...))
	if err == nil {
		return job, false, nil
	}
	var zero J
	if !errors.Is(err, pgx.ErrNoRows) {
		return zero, false, fmt.Errorf("request %s: %w", t.Noun, err)
	}
	job, err = t.scan(q.QueryRow(ctx, `SELECT `+t.columns()+` FROM `+t.Name+` WHERE state IN ('PENDING', 'RUNNING')`))
	if errors.Is(err, pgx.ErrNoRows) {
		// The open job ended between the insert and the read: the caller asks again.
		return zero, false, fmt.Errorf("request %s: the open job ended meanwhile; try again", t.Noun)
	}
	if err != nil {
		return zero, false, fmt.Errorf("read the open %s: %w", t.Noun, err)
	}
	return job, true, nil
}

// PreviewRequest returns what Request would answer, changing nothing (a dry run): the open job
// (existing true), or the job spec would register, with ID 0 and its total and unknown not
// counted yet (the backfill counts them when it starts the job).
func (t *Table[J]) PreviewRequest(ctx context.Context, q db.Executor, spec Spec, now time.Time) (job J, existing bool, err error) {
	job, err = t.scan(q.QueryRow(ctx, `SELECT `+t.columns()+` FROM `+t.Name+` WHERE state IN ('PENDING', 'RUNNING')`))
	if err == nil {
		return job, true, nil
	}
	var zero J
	if !errors.Is(err, pgx.ErrNoRows) {
		return zero, false, fmt.Errorf("read the open %s: %w", t.Noun, err)
	}
	r := t.Row(&zero)
	if len(spec.FLIDs) > 0 {
		r.FLIDs = spec.FLIDs
	}
	r.State, r.RequestedBy, r.Comment, r.RequestedAt, r.UpdatedAt = StatePending, spec.RequestedBy, spec.Comment, now.UTC(), now.UTC()
	return zero, false, nil
}

// Get returns one job, or an error wrapping NotFound and db.ErrNotFound.
func (t *Table[J]) Get(ctx context.Context, q db.Executor, id int64) (J, error) {
	j, err := t.scan(q.QueryRow(ctx, `SELECT `+t.columns()+` FROM `+t.Name+` WHERE `+t.Key+` = $1`, id))
	var zero J
	if errors.Is(err, pgx.ErrNoRows) {
		return zero, fmt.Errorf("%s %d: %w", t.Noun, id, errors.Join(t.NotFound, db.ErrNotFound))
	}
	if err != nil {
		return zero, fmt.Errorf("read %s %d: %w", t.Noun, id, err)
	}
	return j, nil
}

// List returns up to limit jobs, newest first, with an ID below before (0: from the newest),
// without their scopes' FLIDs (Row.FLIDs).
func (t *Table[J]) List(ctx context.Context, q db.Executor, before int64, limit int) ([]J, error) {
	rows, err := q.Query(ctx, `SELECT `+t.columnsWith(listScopeColumns)+` FROM `+t.Name+`
		WHERE $1 = 0 OR `+t.Key+` < $1 ORDER BY `+t.Key+` DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", t.Plural, err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (J, error) { return t.scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", t.Plural, err)
	}
	return jobs, nil
}

// LockOpen returns the open job locked for the caller's transaction (FOR UPDATE), or nil.
func (t *Table[J]) LockOpen(ctx context.Context, q db.Executor) (*J, error) {
	j, err := t.scan(q.QueryRow(ctx, `SELECT `+t.columns()+` FROM `+t.Name+`
		WHERE state IN ('PENDING', 'RUNNING') FOR UPDATE`))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock the open %s: %w", t.Noun, err)
	}
	return &j, nil
}

// Start marks a pending job RUNNING with the number of flights it will do.
func (t *Table[J]) Start(ctx context.Context, q db.Executor, id, total int64, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE `+t.Name+` SET state = 'RUNNING', total = $2, started_at = $3, updated_at = $3, error = ''
		WHERE `+t.Key+` = $1 AND state = 'PENDING'`, id, total, now.UTC())
	if err != nil {
		return fmt.Errorf("start %s %d: %w", t.Noun, id, err)
	}
	return nil
}

// Step is what one step of a job did.
type Step struct {
	Cursor string
	// Done is how many more flights were done.
	Done int64
	// Set are the new values of the table's Set columns, Add what the step adds to its Add
	// columns, in their order.
	Set []any
	Add []int64
}

// Advance records a step of a running job: its cursor, and the flights and counts it added.
func (t *Table[J]) Advance(ctx context.Context, q db.Executor, id int64, s Step, now time.Time) error {
	args := []any{id, now.UTC(), s.Cursor, s.Done}
	set := []string{"cursor = $3", "done = done + $4"}
	for i, c := range t.Set {
		args = append(args, s.Set[i])
		set = append(set, c+" = $"+strconv.Itoa(len(args)))
	}
	for i, c := range t.Add {
		args = append(args, s.Add[i])
		set = append(set, c+" = "+c+" + $"+strconv.Itoa(len(args)))
	}
	_, err := q.Exec(ctx, `UPDATE `+t.Name+` SET `+strings.Join(set, ", ")+`, error = '', updated_at = $2
		WHERE `+t.Key+` = $1 AND state = 'RUNNING'`, args...)
	if err != nil {
		return fmt.Errorf("advance %s %d: %w", t.Noun, id, err)
	}
	return nil
}

// Finish ends an open job in state (StateDone or StateCancelled).
func (t *Table[J]) Finish(ctx context.Context, q db.Executor, id int64, state string, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE `+t.Name+` SET state = $2, finished_at = $3, updated_at = $3, error = ''
		WHERE `+t.Key+` = $1 AND state IN ('PENDING', 'RUNNING')`, id, state, now.UTC())
	if err != nil {
		return fmt.Errorf("finish %s %d: %w", t.Noun, id, err)
	}
	return nil
}

// NoteError records the failure of a step on an open job; the step is tried again.
func (t *Table[J]) NoteError(ctx context.Context, q db.Executor, id int64, cause error, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE `+t.Name+` SET error = $2, updated_at = $3
		WHERE `+t.Key+` = $1 AND state IN ('PENDING', 'RUNNING')`, id, cause.Error(), now.UTC())
	if err != nil {
		return fmt.Errorf("note the error of %s %d: %w", t.Noun, id, err)
	}
	return nil
}

// Cancellation is who asks to cancel a job and why, kept on its row.
type Cancellation struct {
	By, Comment string
}

// Cancel stops a job: a pending one is CANCELLED at once, a running one at its next step (the
// backfill finishes the page it is on). The row keeps c and the time of the first cancel; a
// second cancel of a job still running changes nothing of it. An error wrapping Finished for a
// job that already ended.
func (t *Table[J]) Cancel(ctx context.Context, q db.Executor, id int64, c Cancellation, now time.Time) (J, error) {
	j, err := t.scan(q.QueryRow(ctx, `UPDATE `+t.Name+` SET
			state = CASE WHEN state = 'PENDING' THEN 'CANCELLED' ELSE state END,
			finished_at = CASE WHEN state = 'PENDING' THEN $2 ELSE finished_at END,
			cancelled_by = CASE WHEN cancel_requested THEN cancelled_by ELSE $3 END,
			cancel_comment = CASE WHEN cancel_requested THEN cancel_comment ELSE $4 END,
			cancel_requested_at = CASE WHEN cancel_requested THEN cancel_requested_at ELSE $2 END,
			cancel_requested = true, updated_at = $2
		WHERE `+t.Key+` = $1 AND state IN ('PENDING', 'RUNNING')
		RETURNING `+t.columns(), id, now.UTC(), c.By, c.Comment))
	var zero J
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := t.Get(ctx, q, id); gerr != nil {
			return zero, gerr
		}
		return zero, fmt.Errorf("cancel %s %d: %w", t.Noun, id, t.Finished)
	}
	if err != nil {
		return zero, fmt.Errorf("cancel %s %d: %w", t.Noun, id, err)
	}
	return j, nil
}

// PreviewCancel returns the job as Cancel would leave it, changing nothing (a dry run): the
// same errors, and the row with the state and cancel columns Cancel would write.
func (t *Table[J]) PreviewCancel(ctx context.Context, q db.Executor, id int64, c Cancellation, now time.Time) (J, error) {
	j, err := t.Get(ctx, q, id)
	if err != nil {
		return j, err
	}
	r := t.Row(&j)
	if !r.Open() {
		var zero J
		return zero, fmt.Errorf("cancel %s %d: %w", t.Noun, id, t.Finished)
	}
	now = now.UTC()
	if r.State == StatePending {
		r.State, r.FinishedAt = StateCancelled, &now
	}
	if !r.CancelRequested {
		r.CancelledBy, r.CancelComment, r.CancelRequestedAt = c.By, c.Comment, &now
	}
	r.CancelRequested, r.UpdatedAt = true, now
	return j, nil
}

// DeleteFinished deletes up to limit jobs that ended (DONE, CANCELLED) before cutoff, oldest
// first, and returns how many (the retention sweep, retention.jobs). An open job is never
// deleted, however old.
func (t *Table[J]) DeleteFinished(ctx context.Context, q db.Executor, cutoff time.Time, limit int) (int64, error) {
	// The candidates come from a MATERIALIZED CTE and the DELETE repeats the predicate, as every
	// retention sweep does (docs/backfill.md, "Maintenance sweeps").
	tag, err := q.Exec(ctx, `WITH c AS MATERIALIZED (
			SELECT `+t.Key+` FROM `+t.Name+`
			WHERE state IN ('DONE', 'CANCELLED') AND finished_at < $1
			ORDER BY `+t.Key+` LIMIT $2 FOR UPDATE SKIP LOCKED)
		DELETE FROM `+t.Name+` j USING c WHERE j.`+t.Key+` = c.`+t.Key+`
		  AND j.state IN ('DONE', 'CANCELLED') AND j.finished_at < $1`, cutoff.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete finished %s: %w", t.Plural, err)
	}
	return tag.RowsAffected(), nil
}
