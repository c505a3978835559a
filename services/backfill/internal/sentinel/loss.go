package sentinel

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/jobs"
)

// LossRequester is the requested_by of a rebuild the sentinel starts on its own because Redis
// lost the projection (docs/redis.md, "Redis lost its data"): the job row is the audit record
// of that decision, beside the operators' own requests.
const LossRequester = "backfill (Redis lost the projection)"

// lossComment is that job's comment.
const lossComment = "started by the backfill: the projection's sentinel key was missing from Redis " +
	"(FLUSHALL, a restart without persistence, an empty replica promoted, or a first start)"

// CheckLoss looks for the projection's sentinel key (projection.SentinelKey). Without it, Redis
// lost its data since the last rebuild of the whole projection began, or never held the
// projection: CheckLoss requests a rebuild of the whole projection and then writes the key, and
// returns the job's ID. Written after the job is committed and before its first page, the key
// is older than every page the job compares, so a loss after it removes the key again and is
// found once the job ended; a loss before it is repaired by the job.
//
// While another job is open, CheckLoss writes the key only if that job rebuilds the whole
// projection and has not begun (every page of it is still to come); otherwise it waits for the
// job's end and looks again. It returns 0 when it requested nothing. An unreachable Redis or
// PostgreSQL decides nothing: the error is returned and the next poll looks again.
func (s *Sentinel) CheckLoss(ctx context.Context, sess Session) (int64, error) {
	if _, ok, err := s.proj.Sentinel(ctx); err != nil || ok {
		return 0, err
	}
	now := s.clock.Now()
	var (
		job      jobs.RebuildJob
		existing bool
	)
	err := sess.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		job, existing, err = jobs.RequestRebuild(ctx, tx, jobs.RebuildSpec{RequestedBy: LossRequester, Comment: lossComment}, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("request a rebuild of the lost projection: %w", err)
	}
	if existing && !(job.State == jobs.StatePending && job.All() && !job.DryRun) {
		return 0, nil
	}
	if !existing {
		s.metrics.lost.Inc()
		s.logger.ErrorContext(ctx, "the projection's sentinel key is missing from Redis: Redis lost its data or never held the "+
			"projection; rebuilding the whole projection from PostgreSQL", "rebuild_id", job.ID, "requested_by", LossRequester)
	}
	mark := fmt.Sprintf("rebuild %d requested at %s", job.ID, now.UTC().Format(time.RFC3339Nano))
	if err := s.proj.SetSentinel(ctx, mark); err != nil {
		return job.ID, err
	}
	return job.ID, nil
}
