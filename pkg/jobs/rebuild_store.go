package jobs

import (
	"context"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Rebuilds is the projection_rebuild table: Get, List, LockOpen, Start, Finish, NoteError and
// Cancel of its jobs (Cancel fails with ErrRebuildFinished for a job that already ended, Get
// with ErrRebuildNotFound for no job).
var Rebuilds = &Table[RebuildJob]{
	Name: "projection_rebuild", Key: "rebuild_id", Noun: "projection rebuild", Plural: "projection rebuilds",
	Extra:   []string{"dry_run", "phase", "missing", "stale", "content", "extra", "repaired"},
	Options: []string{"dry_run"},
	Set:     []string{"phase"},
	Add:     []string{"missing", "stale", "content", "extra", "repaired"},
	Fields: func(j *RebuildJob) (*Row, []any) {
		c := &j.Counts
		return &j.Row, []any{&j.DryRun, &j.Phase, &c.Missing, &c.Stale, &c.Content, &c.Extra, &c.Repaired}
	},
	NotFound: ErrRebuildNotFound, Finished: ErrRebuildFinished,
}

// RequestRebuild registers a job for spec, or returns the open one (existing true) when a job is
// already pending or running: one job at a time, and asking twice is harmless. The open job
// may have another scope or dry_run than spec; the caller reports which one it got.
func RequestRebuild(ctx context.Context, q db.Executor, spec RebuildSpec, now time.Time) (job RebuildJob, existing bool, err error) {
	if spec, err = spec.Normalize(); err != nil {
		return RebuildJob{}, false, err
	}
	return Rebuilds.Request(ctx, q, Spec{FLIDs: spec.FLIDs, RequestedBy: spec.RequestedBy, Comment: spec.Comment,
		Options: []any{spec.DryRun}}, now)
}

// RebuildProgress is what one step of a rebuild did.
type RebuildProgress struct {
	Phase, Cursor string
	// Done is how many more flights were compared.
	Done   int64
	Counts RebuildCounts
}

// AdvanceRebuild records a step: the new phase and cursor, and the flights and drift it added.
func AdvanceRebuild(ctx context.Context, q db.Executor, id int64, p RebuildProgress, now time.Time) error {
	c := p.Counts
	return Rebuilds.Advance(ctx, q, id, Step{Cursor: p.Cursor, Done: p.Done, Set: []any{p.Phase},
		Add: []int64{c.Missing, c.Stale, c.Content, c.Extra, c.Repaired}}, now)
}
