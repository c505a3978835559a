package sentinel

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/pkg/projection"
	"github.com/msgexchange/msgexchange/services/backfill/internal/jobrun"
)

// The on-demand checks and rebuilds (docs/redis.md, "Rebuild"): a job requested through the
// control API (jobs.Rebuilds) is executed here one step at a time (jobrun), each step one page
// compared and repaired under the pipeline lock, as the periodic check does, with the cursor
// and counts recorded. A step done twice after a crash or a failover changes nothing: a repair
// is a rewrite from PostgreSQL.

// newRebuilds is the runner of the rebuilds, its steps the pages of step.
func (s *Sentinel) newRebuilds() *jobrun.Runner[jobs.RebuildJob] {
	return jobrun.New(jobs.Rebuilds, jobrun.Work[jobs.RebuildJob]{
		Started: func(job *jobs.RebuildJob) []any { return []any{"dry_run", job.DryRun} },
		Step:    s.step,
	}, s.clock, s.logger)
}

// step does one page of a running job.
func (s *Sentinel) step(ctx context.Context, tx pgx.Tx, job *jobs.RebuildJob) (bool, error) {
	now := s.clock.Now()
	var (
		res      = Result{Drift: map[projection.Drift]int{}}
		next     jobs.RebuildProgress
		finished bool
		err      error
	)
	switch job.Phase {
	case jobs.RebuildPhaseFlights:
		next, finished, err = s.flightsStep(ctx, tx, job, &res)
	case jobs.RebuildPhaseExtraDocs, jobs.RebuildPhaseExtraVersions:
		next, finished, err = s.extrasStep(ctx, tx, job, &res)
	default:
		err = fmt.Errorf("unknown phase %q", job.Phase)
	}
	if err != nil {
		return false, err
	}
	next.Counts = jobs.RebuildCounts{Missing: int64(res.Drift[projection.Missing]), Stale: int64(res.Drift[projection.Stale]),
		Content: int64(res.Drift[projection.Content]), Extra: int64(res.Drift[projection.Extra]), Repaired: int64(res.Repaired)}
	if err := jobs.AdvanceRebuild(ctx, tx, job.ID, next, now); err != nil {
		return false, err
	}
	if !finished {
		return true, nil
	}
	// The last step: the job's totals are this step's plus what the row holds.
	c := job.Counts.Add(next.Counts)
	s.logger.Info("projection rebuild done", "rebuild_id", job.ID, "dry_run", job.DryRun, "checked", job.Done+next.Done,
		"missing", c.Missing, "stale", c.Stale, "content", c.Content, "extra", c.Extra, "repaired", c.Repaired)
	if job.All() {
		s.observe(Result{Checked: int(job.Done + next.Done), Drift: map[projection.Drift]int{projection.Missing: int(c.Missing),
			projection.Stale: int(c.Stale), projection.Content: int(c.Content), projection.Extra: int(c.Extra)}, Repaired: int(c.Repaired)},
			jobMode(job))
	}
	return false, jobs.Rebuilds.Finish(ctx, tx, job.ID, jobs.StateDone, now)
}

// jobMode is the mode a job's drift is counted under.
func jobMode(job *jobs.RebuildJob) Mode {
	if job.DryRun {
		return ModeDryRun
	}
	return ModeRepair
}

// flightsStep compares the next page of the job's flights. A FLID of a scoped job that
// PostgreSQL does not have is an extra when Redis holds a key of it. finished reports that the
// job has nothing left to do.
func (s *Sentinel) flightsStep(ctx context.Context, tx pgx.Tx, job *jobs.RebuildJob, res *Result) (next jobs.RebuildProgress, finished bool, err error) {
	var page []string
	if job.All() {
		if page, err = flightstore.SampleFLIDs(ctx, tx, job.Cursor, 1, s.cfg.Page); err != nil {
			return next, false, err
		}
	} else {
		page = job.NextFLIDs(s.cfg.Page)
	}
	next = jobs.RebuildProgress{Phase: jobs.RebuildPhaseFlights, Cursor: job.Cursor, Done: int64(len(page))}
	if len(page) > 0 {
		next.Cursor = page[len(page)-1]
		if err := s.comparePage(ctx, tx, page, res, pageOpts{mode: jobMode(job), lost: job.RequestedBy == LossRequester}); err != nil {
			return next, false, err
		}
		if !job.All() {
			if err := s.scopedExtras(ctx, tx, page, res, jobMode(job)); err != nil {
				return next, false, err
			}
		}
	}
	if len(page) < s.cfg.Page {
		if !job.All() {
			return next, true, nil
		}
		next.Phase, next.Cursor = jobs.RebuildPhaseExtraDocs, "0"
	}
	return next, false, nil
}

// scopedExtras treats the FLIDs of page that PostgreSQL does not have but Redis has keys of as
// extras (the comparison skipped them).
func (s *Sentinel) scopedExtras(ctx context.Context, tx pgx.Tx, page []string, res *Result, mode Mode) error {
	unknown, err := flightstore.Unknown(ctx, tx, page)
	if err != nil || len(unknown) == 0 {
		return err
	}
	got, err := s.proj.Observe(ctx, unknown)
	if err != nil {
		return err
	}
	var present []string
	for _, o := range got {
		if o.Doc != nil || o.Version >= 0 {
			present = append(present, o.FLID)
		}
	}
	if len(present) == 0 {
		return nil
	}
	return s.removeUnknown(ctx, tx, present, res, mode)
}

// extrasStep scans one page of the documents, then of the version hash, for keys of FLIDs
// PostgreSQL does not have. The scan cursor is Redis's: a Redis restarted meanwhile may make the
// rest of the scan miss keys, which the next check finds.
func (s *Sentinel) extrasStep(ctx context.Context, tx pgx.Tx, job *jobs.RebuildJob, res *Result) (next jobs.RebuildProgress, finished bool, err error) {
	cursor, err := strconv.ParseUint(job.Cursor, 10, 64)
	if err != nil {
		return next, false, fmt.Errorf("scan cursor %q: %w", job.Cursor, err)
	}
	scan := s.proj.ScanDocs
	if job.Phase == jobs.RebuildPhaseExtraVersions {
		scan = s.proj.ScanVersions
	}
	flids, nextCursor, err := scan(ctx, cursor, int64(s.cfg.Page))
	if err != nil {
		return next, false, err
	}
	if job.Phase == jobs.RebuildPhaseExtraVersions {
		// An unknown FLID that still has a document was counted by the document scan (a dry
		// run leaves it there): count it once.
		if flids, err = s.withoutDocs(ctx, tx, flids); err != nil {
			return next, false, err
		}
	}
	if len(flids) > 0 {
		if err := s.removeUnknown(ctx, tx, flids, res, jobMode(job)); err != nil {
			return next, false, err
		}
	}
	next = jobs.RebuildProgress{Phase: job.Phase, Cursor: strconv.FormatUint(nextCursor, 10)}
	switch {
	case nextCursor != 0:
		return next, false, nil
	case job.Phase == jobs.RebuildPhaseExtraDocs:
		next.Phase, next.Cursor = jobs.RebuildPhaseExtraVersions, "0"
		return next, false, nil
	}
	return next, true, nil
}

// withoutDocs returns those of flids unknown to PostgreSQL that have no document in Redis.
func (s *Sentinel) withoutDocs(ctx context.Context, tx pgx.Tx, flids []string) ([]string, error) {
	unknown, err := flightstore.Unknown(ctx, tx, flids)
	if err != nil || len(unknown) == 0 {
		return nil, err
	}
	got, err := s.proj.Observe(ctx, unknown)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range got {
		if o.Doc == nil {
			out = append(out, o.FLID)
		}
	}
	return out, nil
}
