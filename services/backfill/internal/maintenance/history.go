package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outbox"
)

// historyRound reads up to HistoryBatch candidate flights and moves each (with its code-share
// children) to history in its own transaction; moved counts flights. more is true when the read was full and every flight moved, so another round
// may find more at once.
func (c *Cleaner) historyRound(ctx context.Context, sess Session) (moved int64, more bool, err error) {
	now := c.clock.Now()
	flids, err := db.TxV(ctx, sess, func(tx pgx.Tx) ([]string, error) {
		if err := c.bound(ctx, tx); err != nil {
			return nil, err
		}
		return flightstore.HistoryCandidates(ctx, tx, c.cfg.History, now, c.cfg.HistoryBatch)
	})
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", historyJob, err)
	}
	skipped := false
	for _, flid := range flids {
		n, err := c.archive(ctx, sess, flid)
		if err != nil {
			if ctx.Err() != nil {
				return moved, false, ctx.Err()
			}
			// One flight that cannot be moved must not hold up the others; it stays in the
			// current state, whole, and is tried again next round.
			c.logger.ErrorContext(ctx, "flight not moved to history; nothing of it was deleted", "flid", flid, "err", err)
			skipped = true
			continue
		}
		if n == 0 {
			skipped = true // changed meanwhile: no longer a candidate
		}
		moved += n
	}
	return moved, len(flids) == c.cfg.HistoryBatch && !skipped, nil
}

// archive moves one flight to history in one transaction under the pipeline lock (R-RETAIN-5,
// R-TX-5: the physical delete holds PIPELINE_LOCK, so a flight the pump is processing is waited
// for, never interleaved with): re-check, history row, delete, tombstone events unless the
// flight was already DELETED (its FDEL sent them), and the Redis projection removed before the
// commit. The lock only covers a step that is running: a flight changed by a message that
// stopped between its ① and ③ is left alone by the candidate predicate and its re-check
// until that message is terminal (flightstore.HistoryCandidates). Any failure rolls everything back, the history row included: history first, then
// delete, or nothing (R-RETAIN-5).
//
// The Redis removal is inside the transaction, like the pump's projection write sits inside its
// step: if Redis fails the flight stays; if the commit failed after Redis succeeded, the flight
// stays in PostgreSQL without a projection until its next change or the next round moves it,
// the same state the pump leaves after a crash between its projection and terminal writes.
func (c *Cleaner) archive(ctx context.Context, sess Session, flid string) (moved int64, err error) {
	now := c.clock.Now()
	err = sess.Tx(ctx, func(tx pgx.Tx) error {
		if err := c.bound(ctx, tx); err != nil {
			return err
		}
		if err := leader.LockPipelineTx(ctx, tx); err != nil {
			c.metrics.failed.WithLabelValues("lock").Inc()
			return err
		}
		group, err := flightstore.Archive(ctx, tx, c.cfg.History, flid, now)
		if err != nil {
			c.metrics.failed.WithLabelValues("history").Inc()
			return err
		}
		var events []outbox.NewEvent
		for _, f := range group {
			if f.State != flight.Deleted {
				events = append(events, tombstones(f, now)...)
			}
		}
		if err := outbox.Add(ctx, tx, events, now); err != nil {
			c.metrics.failed.WithLabelValues("tombstone").Inc()
			return err
		}
		for _, f := range group {
			if err := c.forget.Forget(ctx, f.FLID); err != nil {
				c.metrics.failed.WithLabelValues("projection").Inc()
				return err
			}
		}
		moved = int64(len(group))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

// HistorySTYP marks the KAFKA:msg tombstone of a flight the history sweep removed, where the
// pump's events carry the STYP of the message that caused them.
const HistorySTYP = "HISTORY"

// tombstones are the deletion events of a flight removed without an FDEL: the same pair the pump
// writes for a deletion (KAFKA:msg note, KAFKA:schd null value), one version above the last
// published state so that consumers ordering by (FLID, STATE_VERSION) take it as newer and the
// schd row's "never backwards" rule accepts it. msg_id 0 says no inbox message caused them.
func tombstones(f flight.Flight, now time.Time) []outbox.NewEvent {
	v := f.Version + 1
	note, err := json.Marshal(map[string]any{
		"FLID": f.FLID, "STATE": flight.Deleted, "STATE_VERSION": v, "MSG_ID": 0,
		"STYP": HistorySTYP, "UPDATED_AT": now.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		panic(errors.Join(errors.New("tombstone note"), err)) // strings and numbers only: cannot fail
	}
	return []outbox.NewEvent{
		{Target: outbox.TargetMsg, PartitionKey: f.FLID, Type: flight.Tombstone, Version: v, Payload: note},
		{Target: outbox.TargetSchd, PartitionKey: f.FLID, Type: flight.Tombstone, Version: v},
	}
}
