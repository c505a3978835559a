// Package rebuild stores the on-demand checks and rebuilds of the Redis projection
// (projection_rebuild; docs/redis.md, "Rebuild"). The control API requests a job, the backfill
// role executes it a page at a time and records its progress here in the same transaction as
// each page, so a job resumes from its cursor after a crash or a failover. A job DONE has
// compared every flight of its scope (and repaired unless a dry run); one CANCELLED keeps what
// it repaired until then.
package rebuild

import (
	"errors"

	"github.com/msgexchange/msgexchange/pkg/jobs"
)

// The phases of a running job.
const (
	// PhaseFlights compares the flights of the scope in FLID order; Cursor is the last FLID done.
	PhaseFlights = "FLIGHTS"
	// PhaseExtraDocs and PhaseExtraVersions scan Redis (SCAN, HSCAN) for keys of FLIDs that
	// PostgreSQL does not have; Cursor is the scan cursor. Only a job of the whole projection
	// has them: a job of some FLIDs looks at those FLIDs' keys during PhaseFlights.
	PhaseExtraDocs     = "EXTRA_DOCS"
	PhaseExtraVersions = "EXTRA_VERSIONS"
)

// ErrNotFound is returned for a job ID that does not exist.
var ErrNotFound = errors.New("rebuild: no such job")

// ErrFinished is returned by Cancel for a job that already ended.
var ErrFinished = errors.New("rebuild: the job has already ended")

// ErrInvalid is returned by Request for a scope it refuses.
var ErrInvalid = errors.New("rebuild: invalid request")

// Spec is what an operator asks for.
type Spec struct {
	// FLIDs limits the job to these flights (at most jobs.MaxFLIDs); empty means the whole
	// projection.
	FLIDs       []string
	DryRun      bool
	RequestedBy string
	Comment     string
}

// Normalize returns the spec with its FLIDs sorted and unique (the order the job walks them
// in), or ErrInvalid.
func (s Spec) Normalize() (Spec, error) {
	var err error
	s.FLIDs, err = jobs.NormalizeFLIDs(s.FLIDs, ErrInvalid, "rebuild the whole projection")
	return s, err
}

// Counts are the drifted flights a job found, by kind, and how many it repaired.
type Counts struct {
	Missing, Stale, Content, Extra, Repaired int64
}

// Found is the number of drifted flights.
func (c Counts) Found() int64 { return c.Missing + c.Stale + c.Content + c.Extra }

// Add returns the sum of c and d.
func (c Counts) Add(d Counts) Counts {
	return Counts{c.Missing + d.Missing, c.Stale + d.Stale, c.Content + d.Content, c.Extra + d.Extra, c.Repaired + d.Repaired}
}

// Job is one projection_rebuild row; its Row's FLIDs are nil for the whole projection.
type Job struct {
	jobs.Row
	DryRun bool
	Phase  string
	Counts Counts
}
