// Package rebuild stores the on-demand checks and rebuilds of the Redis projection
// (projection_rebuild; docs/redis.md, "Rebuild"). The control API requests a job, the backfill
// role executes it a page at a time and records its progress here in the same transaction as
// each page, so a job resumes from its cursor after a crash or a failover.
package rebuild

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The states of a job.
const (
	// StatePending: requested, not yet picked up by the backfill role.
	StatePending = "PENDING"
	// StateRunning: being executed (or waiting for the backfill role to come back).
	StateRunning = "RUNNING"
	// StateDone: every flight of the scope compared (and repaired unless a dry run).
	StateDone = "DONE"
	// StateCancelled: stopped by an operator; what it repaired until then stays repaired.
	StateCancelled = "CANCELLED"
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

// MaxFLIDs bounds the FLIDs one job names; a larger selection is the whole projection.
const MaxFLIDs = 10000

// ErrNotFound is returned for a job ID that does not exist.
var ErrNotFound = errors.New("rebuild: no such job")

// ErrFinished is returned by Cancel for a job that already ended.
var ErrFinished = errors.New("rebuild: the job has already ended")

// ErrInvalid is returned by Request for a scope it refuses.
var ErrInvalid = errors.New("rebuild: invalid request")

// Spec is what an operator asks for.
type Spec struct {
	// FLIDs limits the job to these flights; empty means the whole projection.
	FLIDs       []string
	DryRun      bool
	RequestedBy string
	Comment     string
}

// Normalize returns the spec with its FLIDs sorted and unique (the order the job walks them
// in), or ErrInvalid.
func (s Spec) Normalize() (Spec, error) {
	if len(s.FLIDs) > MaxFLIDs {
		return s, fmt.Errorf("%w: %d FLIDs, at most %d (rebuild the whole projection instead)", ErrInvalid, len(s.FLIDs), MaxFLIDs)
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

// Job is one projection_rebuild row.
type Job struct {
	ID int64
	// FLIDs is the scope; nil for the whole projection.
	FLIDs  []string
	DryRun bool
	State  string
	Phase  string
	Cursor string
	// Done of Total flights compared.
	Done, Total     int64
	Counts          Counts
	RequestedBy     string
	Comment         string
	CancelRequested bool
	// Error is the last failure of a step; cleared by the next step that succeeds.
	Error       string
	RequestedAt time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	UpdatedAt   time.Time
}

// All reports whether the job covers the whole projection.
func (j Job) All() bool { return j.FLIDs == nil }

// Open reports whether the job has not ended.
func (j Job) Open() bool { return j.State == StatePending || j.State == StateRunning }

// NextFLIDs returns up to n FLIDs of a scoped job after the cursor (its FLIDs are sorted).
func (j Job) NextFLIDs(n int) []string {
	i, _ := slices.BinarySearch(j.FLIDs, j.Cursor)
	if i < len(j.FLIDs) && j.FLIDs[i] == j.Cursor {
		i++
	}
	return j.FLIDs[i:min(i+n, len(j.FLIDs))]
}
