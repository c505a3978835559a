package jobs

// The on-demand checks and rebuilds of the Redis projection (projection_rebuild; docs/redis.md,
// "Rebuild"). The control API requests a job, the backfill role executes it a page at a time and
// records its progress here in the same transaction as each page, so a job resumes from its
// cursor after a crash or a failover. A job DONE has compared every flight of its scope (and
// repaired unless a dry run); one CANCELLED keeps what it repaired until then.

import "errors"

// The phases of a running rebuild.
const (
	// RebuildPhaseFlights compares the flights of the scope in FLID order; Cursor is the last
	// FLID done.
	RebuildPhaseFlights = "FLIGHTS"
	// RebuildPhaseExtraDocs and RebuildPhaseExtraVersions scan Redis (SCAN, HSCAN) for keys of
	// FLIDs that PostgreSQL does not have; Cursor is the scan cursor. Only a job of the whole
	// projection has them: a job of some FLIDs looks at those FLIDs' keys during
	// RebuildPhaseFlights.
	RebuildPhaseExtraDocs     = "EXTRA_DOCS"
	RebuildPhaseExtraVersions = "EXTRA_VERSIONS"
)

// ErrRebuildNotFound is returned for a rebuild ID that does not exist.
var ErrRebuildNotFound = errors.New("rebuild: no such job")

// ErrRebuildFinished is returned by Cancel for a rebuild that already ended.
var ErrRebuildFinished = errors.New("rebuild: the job has already ended")

// ErrRebuildInvalid is returned by RequestRebuild for a scope it refuses.
var ErrRebuildInvalid = errors.New("rebuild: invalid request")

// RebuildSpec is what an operator asks for.
type RebuildSpec struct {
	// FLIDs limits the job to these flights (at most MaxFLIDs); empty means the whole
	// projection.
	FLIDs       []string
	DryRun      bool
	RequestedBy string
	Comment     string
}

// Normalize returns the spec with its FLIDs sorted and unique (the order the job walks them
// in), or ErrRebuildInvalid.
func (s RebuildSpec) Normalize() (RebuildSpec, error) {
	var err error
	s.FLIDs, err = NormalizeFLIDs(s.FLIDs, ErrRebuildInvalid, "rebuild the whole projection")
	return s, err
}

// RebuildCounts are the drifted flights a rebuild found, by kind, and how many it repaired.
type RebuildCounts struct {
	Missing, Stale, Content, Extra, Repaired int64
}

// Add returns the sum of c and d.
func (c RebuildCounts) Add(d RebuildCounts) RebuildCounts {
	return RebuildCounts{c.Missing + d.Missing, c.Stale + d.Stale, c.Content + d.Content, c.Extra + d.Extra, c.Repaired + d.Repaired}
}

// RebuildJob is one projection_rebuild row; its Row's FLIDs are nil for the whole projection.
type RebuildJob struct {
	Row
	DryRun bool
	Phase  string
	Counts RebuildCounts
}
