// Package republish stores the jobs that send the current state of flights to KAFKA:schd again
// (schd_republish; docs/operations.md, "Kafka topic lost / consumer needs a full reload"). The
// control API requests a job, the backfill role executes it a page at a time and records its
// progress here in the same transaction as each page, so a job resumes from its cursor after a
// crash or a failover, and a job run twice only sends duplicates. A job DONE has written every
// flight of its scope to the outbox; one CANCELLED keeps what it wrote until then, which is
// still sent.
package republish

import (
	"context"
	"errors"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/jobs"
)

// ErrNotFound is returned for a job ID that does not exist.
var ErrNotFound = errors.New("republish: no such job")

// ErrFinished is returned by Cancel for a job that already ended.
var ErrFinished = errors.New("republish: the job has already ended")

// ErrInvalid is returned by Request for a scope it refuses.
var ErrInvalid = errors.New("republish: invalid request")

// Job is one schd_republish row; its Row's FLIDs are nil for every flight of the current state,
// and Done counts the flights written to the outbox.
type Job struct {
	jobs.Row
	// Unknown FLIDs of the scope had no state.
	Unknown int64
}

// Jobs is the schd_republish table: Get, List, LockOpen, Start, Finish, NoteError and Cancel
// of its jobs (Cancel fails with ErrFinished for a job that already ended, Get with ErrNotFound
// for no job).
var Jobs = &jobs.Table[Job]{
	Name: "schd_republish", Key: "republish_id", Noun: "republish", Plural: "republishes",
	Extra:    []string{"unknown"},
	Add:      []string{"unknown"},
	Fields:   func(j *Job) (*jobs.Row, []any) { return &j.Row, []any{&j.Unknown} },
	NotFound: ErrNotFound, Finished: ErrFinished,
}

// Spec is what an operator asks for.
type Spec struct {
	// FLIDs limits the job to these flights (at most jobs.MaxFLIDs); empty means every flight
	// of the current state.
	FLIDs       []string
	RequestedBy string
	Comment     string
}

// Normalize returns the spec with its FLIDs sorted and unique (the order the job walks them
// in), or ErrInvalid.
func (s Spec) Normalize() (Spec, error) {
	var err error
	s.FLIDs, err = jobs.NormalizeFLIDs(s.FLIDs, ErrInvalid, "republish every flight")
	return s, err
}

// Request registers a job for spec, or returns the open one (existing true) when a job is
// already pending or running: one job at a time, and asking twice is harmless. The open job
// may have another scope than spec; the caller reports which one it got.
func Request(ctx context.Context, q db.Executor, spec Spec, now time.Time) (job Job, existing bool, err error) {
	if spec, err = spec.Normalize(); err != nil {
		return Job{}, false, err
	}
	return Jobs.Request(ctx, q, jobs.Spec{FLIDs: spec.FLIDs, RequestedBy: spec.RequestedBy, Comment: spec.Comment}, now)
}

// Progress is what one step of a job did.
type Progress struct {
	Cursor string
	// Done is how many more flights were written, Unknown how many FLIDs had no state.
	Done, Unknown int64
}

// Advance records a step: the new cursor and the flights it added.
func Advance(ctx context.Context, q db.Executor, id int64, p Progress, now time.Time) error {
	return Jobs.Advance(ctx, q, id, jobs.Step{Cursor: p.Cursor, Done: p.Done, Add: []int64{p.Unknown}}, now)
}
