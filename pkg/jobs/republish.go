package jobs

// The jobs that send the current state of flights to KAFKA:schd again (schd_republish;
// docs/runbooks.md, "Kafka topic lost / consumer needs a full reload"). The control API
// requests a job, the backfill role executes it a page at a time and records its progress here
// in the same transaction as each page, so a job resumes from its cursor after a crash or a
// failover, and a job run twice only sends duplicates. A job DONE has written every flight of
// its scope to the outbox; one CANCELLED keeps what it wrote until then, which is still sent.

import (
	"context"
	"errors"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// ErrRepublishNotFound is returned for a republish ID that does not exist.
var ErrRepublishNotFound = errors.New("republish: no such job")

// ErrRepublishFinished is returned by Cancel for a republish that already ended.
var ErrRepublishFinished = errors.New("republish: the job has already ended")

// ErrRepublishInvalid is returned by RequestRepublish for a scope it refuses.
var ErrRepublishInvalid = errors.New("republish: invalid request")

// RepublishJob is one schd_republish row; its Row's FLIDs are nil for every flight of the
// current state, and Done counts the flights written to the outbox.
type RepublishJob struct {
	Row
	// Unknown FLIDs of the scope had no state.
	Unknown int64
}

// Republishes is the schd_republish table: Get, List, LockOpen, Start, Finish, NoteError and Cancel
// of its jobs (Cancel fails with ErrRepublishFinished for a job that already ended, Get with
// ErrRepublishNotFound for no job).
var Republishes = &Table[RepublishJob]{
	Name: "schd_republish", Key: "republish_id", Noun: "republish", Plural: "republishes",
	Extra:    []string{"unknown"},
	Add:      []string{"unknown"},
	Fields:   func(j *RepublishJob) (*Row, []any) { return &j.Row, []any{&j.Unknown} },
	NotFound: ErrRepublishNotFound, Finished: ErrRepublishFinished,
}

// RepublishSpec is what an operator asks for.
type RepublishSpec struct {
	// FLIDs limits the job to these flights (at most MaxFLIDs); empty means every flight
	// of the current state.
	FLIDs       []string
	RequestedBy string
	Comment     string
}

// Normalize returns the spec with its FLIDs sorted and unique (the order the job walks them
// in), or ErrRepublishInvalid.
func (s RepublishSpec) Normalize() (RepublishSpec, error) {
	var err error
	s.FLIDs, err = NormalizeFLIDs(s.FLIDs, ErrRepublishInvalid, "republish every flight")
	return s, err
}

// RequestRepublish registers a job for spec, or returns the open one (existing true) when a job is
// already pending or running: one job at a time, and asking twice is harmless. The open job
// may have another scope than spec; the caller reports which one it got.
func RequestRepublish(ctx context.Context, q db.Executor, spec RepublishSpec, now time.Time) (job RepublishJob, existing bool, err error) {
	if spec, err = spec.Normalize(); err != nil {
		return RepublishJob{}, false, err
	}
	return Republishes.Request(ctx, q, Spec{FLIDs: spec.FLIDs, RequestedBy: spec.RequestedBy, Comment: spec.Comment}, now)
}

// PreviewRepublish returns what RequestRepublish would answer, changing nothing (a dry run):
// the open job (existing true), or the job spec would register (ID 0).
func PreviewRepublish(ctx context.Context, q db.Executor, spec RepublishSpec, now time.Time) (job RepublishJob, existing bool, err error) {
	if spec, err = spec.Normalize(); err != nil {
		return RepublishJob{}, false, err
	}
	return Republishes.PreviewRequest(ctx, q, Spec{FLIDs: spec.FLIDs, RequestedBy: spec.RequestedBy, Comment: spec.Comment}, now)
}

// RepublishProgress is what one step of a republish did.
type RepublishProgress struct {
	Cursor string
	// Done is how many more flights were written, Unknown how many FLIDs had no state.
	Done, Unknown int64
}

// AdvanceRepublish records a step: the new cursor and the flights it added.
func AdvanceRepublish(ctx context.Context, q db.Executor, id int64, p RepublishProgress, now time.Time) error {
	return Republishes.Advance(ctx, q, id, Step{Cursor: p.Cursor, Done: p.Done, Add: []int64{p.Unknown}}, now)
}
