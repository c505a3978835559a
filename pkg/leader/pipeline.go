package leader

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// UnlockPipeline releases the session's pipeline lock.
func UnlockPipeline(ctx context.Context, q db.Executor) error {
	if _, err := q.Exec(ctx, unlockSQL, pipelineLockKey); err != nil {
		return fmt.Errorf("pipeline unlock: %w", err)
	}
	return nil
}

const (
	lockSQL   = `SELECT pg_advisory_lock($1)`
	unlockSQL = `SELECT pg_advisory_unlock($1)`
)

// AddLockPipeline adds to b the statement that takes the pipeline lock for the caller's session
// until UnlockPipeline, for a caller that takes it in the round trip of its first statements
// (db.Pipelined): the pump holds it across its whole processing step, Redis write included.
func AddLockPipeline(b *pgx.Batch) {
	b.Queue(lockSQL, pipelineLockKey)
}

// AddUnlockPipeline adds UnlockPipeline to b, for a caller that sends its last statements
// with the release.
func AddUnlockPipeline(b *pgx.Batch) {
	b.Queue(unlockSQL, pipelineLockKey)
}

// LockPipelineTx takes the pipeline lock for the caller's transaction (the history sweep, the consistency sentinel).
func LockPipelineTx(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, pipelineLockKey); err != nil {
		return fmt.Errorf("pipeline lock: %w", err)
	}
	return nil
}
