package sentinel

import (
	"cmp"
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
//
// The key survives a failover, or a restart from a snapshot, that lost only the last writes.
// So CheckLoss also notes the Redis server's run_id and, when it changed since its last look
// (a promoted replica under Sentinel, a restarted server), requests a rebuild of the whole
// projection too, which repairs what the new server lacks and rewrites nothing else.
func (s *Sentinel) CheckLoss(ctx context.Context, sess Session) (int64, error) {
	// A server that refuses INFO (an ACL without it) leaves only the key to go by: the loss
	// check must not depend on the change check.
	server, _ := s.proj.ServerID(ctx)
	_, ok, err := s.proj.Sentinel(ctx)
	if err != nil {
		return 0, err
	}
	if ok {
		if s.server == "" || server == "" || s.server == server {
			s.server = cmp.Or(server, s.server)
			return 0, nil
		}
		id, covered, err := s.requestAfterSwitch(ctx, sess)
		if covered {
			s.server = server
		}
		return id, err
	}
	id, err := s.requestAfterLoss(ctx, sess)
	if err == nil {
		s.server = server
	}
	return id, err
}

// requestAfterLoss requests the rebuild of a projection whose sentinel key is gone, and writes
// the key.
func (s *Sentinel) requestAfterLoss(ctx context.Context, sess Session) (int64, error) {
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

// SwitchRequester is the requested_by of the rebuild CheckLoss requests when the Redis server
// changed under the projection (docs/redis.md, "Sentinel").
const SwitchRequester = "backfill (Redis server changed)"

// requestAfterSwitch requests a rebuild of the whole projection after the Redis server changed.
// covered is false while another job is open: that one finishes first and the next poll asks
// again, except a pending rebuild of the whole projection, which already covers the change.
func (s *Sentinel) requestAfterSwitch(ctx context.Context, sess Session) (id int64, covered bool, err error) {
	var (
		job      jobs.RebuildJob
		existing bool
	)
	err = sess.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		job, existing, err = jobs.RequestRebuild(ctx, tx, jobs.RebuildSpec{RequestedBy: SwitchRequester, Comment: switchComment}, s.clock.Now())
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("request a rebuild after the Redis server changed: %w", err)
	}
	if existing && !(job.State == jobs.StatePending && job.All() && !job.DryRun) {
		return 0, false, nil
	}
	if !existing {
		s.logger.WarnContext(ctx, "the Redis server changed (a failover or a restart): checking the whole projection against "+
			"PostgreSQL for the writes the former server acknowledged last", "rebuild_id", job.ID, "requested_by", SwitchRequester)
	}
	return job.ID, true, nil
}

// switchComment is that job's comment.
const switchComment = "started by the backfill: the Redis server changed (a Sentinel failover or a restart), " +
	"which may have lost the last writes"
