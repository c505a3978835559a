package pgtest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/leader"
)

// LockPipeline takes the pipeline lock for conn's session as the pump takes it, with the
// statement it sends ahead of a processing step (leader.AddLockPipeline), for a test that
// stands in for the pump while a sweep or a check waits for it. leader.UnlockPipeline
// releases it.
func LockPipeline(ctx context.Context, conn *pgx.Conn) error {
	b := &pgx.Batch{}
	leader.AddLockPipeline(b)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pipeline lock: %w", err)
	}
	return nil
}
