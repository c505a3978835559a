package rebuild

import (
	"context"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/jobs"
)

// Jobs is the projection_rebuild table: Get, List, LockOpen, Start, Finish, NoteError and
// Cancel of its jobs (Cancel fails with ErrFinished for a job that already ended, Get with
// ErrNotFound for no job).
var Jobs = &jobs.Table[Job]{
	Name: "projection_rebuild", Key: "rebuild_id", Noun: "projection rebuild", Plural: "projection rebuilds",
	Extra:   []string{"dry_run", "phase", "missing", "stale", "content", "extra", "repaired"},
	Options: []string{"dry_run"},
	Set:     []string{"phase"},
	Add:     []string{"missing", "stale", "content", "extra", "repaired"},
	Fields: func(j *Job) (*jobs.Row, []any) {
		c := &j.Counts
		return &j.Row, []any{&j.DryRun, &j.Phase, &c.Missing, &c.Stale, &c.Content, &c.Extra, &c.Repaired}
	},
	NotFound: ErrNotFound, Finished: ErrFinished,
}

// Request registers a job for spec, or returns the open one (existing true) when a job is
// already pending or running: one job at a time, and asking twice is harmless. The open job
// may have another scope or dry_run than spec; the caller reports which one it got.
func Request(ctx context.Context, q db.Executor, spec Spec, now time.Time) (job Job, existing bool, err error) {
	if spec, err = spec.Normalize(); err != nil {
		return Job{}, false, err
	}
	return Jobs.Request(ctx, q, jobs.Spec{FLIDs: spec.FLIDs, RequestedBy: spec.RequestedBy, Comment: spec.Comment,
		Options: []any{spec.DryRun}}, now)
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
	return Jobs.Advance(ctx, q, id, jobs.Step{Cursor: p.Cursor, Done: p.Done, Set: []any{p.Phase},
		Add: []int64{c.Missing, c.Stale, c.Content, c.Extra, c.Repaired}}, now)
}
