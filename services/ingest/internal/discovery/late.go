package discovery

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/queue"
)

// Reconcile looks up the watched permanent holes in the inbox and enqueues the rows that
// appeared in them after W had passed (R-INGEST-8). W only
// ever passes existing rows and released holes, so these rows are the only ones discovery
// could otherwise lose. Each page of found rows is recorded in inbox_late and enqueued in one
// transaction on the lock connection; a row recorded before is not counted again. The inbox
// is read outside any transaction, one bounded query per page. It returns how many late rows
// were enqueued; none while a contract violation stands.
func (p *Poller) Reconcile(ctx context.Context, txer Txer) (int64, error) {
	now := p.clock.Now()
	var holes []cursor.Hole
	var standing bool
	if err := txer.Tx(ctx, func(tx pgx.Tx) error {
		cur, err := cursor.Load(ctx, tx)
		if err != nil {
			return err
		}
		// Nothing is enqueued while a contract violation stands: after an inbox reset the
		// rows in the released holes may be new messages under reused IDs. They wait with
		// everything else for the operator's resolution; the holes stay watched, so they
		// are found once it is resolved.
		if standing = cur.Violation != nil; standing {
			return nil
		}
		holes, err = cursor.WatchedHoles(ctx, tx, now.Add(-p.cfg.LateWatchRetention))
		return err
	}); err != nil || standing {
		return 0, err
	}
	p.metrics.watchedHoles.Set(float64(len(holes)))
	var total int64
	for len(holes) > 0 {
		chunk := holes[:min(len(holes), aodb.MaxRanges)]
		holes = holes[len(chunk):]
		n, err := p.reconcileChunk(ctx, txer, chunk)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (p *Poller) reconcileChunk(ctx context.Context, txer Txer, holes []cursor.Hole) (int64, error) {
	ranges := make([][2]int64, len(holes))
	for i, h := range holes {
		ranges[i] = [2]int64{h.First, h.Last}
	}
	var total int64
	after := holes[0].First - 1
	for {
		rows, err := p.inbox.InRanges(ctx, ranges, after, p.cfg.ClaimBatch)
		if err != nil {
			p.metrics.readErrors.Inc()
			return total, fmt.Errorf("late-arrival lookup: %w", err)
		}
		if len(rows) == 0 {
			return total, nil
		}
		n, err := p.enqueueLate(ctx, txer, holes, rows)
		total += n
		if err != nil {
			return total, err
		}
		if len(rows) < p.cfg.ClaimBatch {
			return total, nil
		}
		after = rows[len(rows)-1].ID
	}
}

// enqueueLate records and enqueues one page of rows found in the holes (sorted by First).
func (p *Poller) enqueueLate(ctx context.Context, txer Txer, holes []cursor.Hole, rows []aodb.Row) (int64, error) {
	now := p.clock.Now()
	late := make([]cursor.Late, len(rows))
	byID := make(map[int64]aodb.Row, len(rows))
	for i, r := range rows {
		// The last hole starting at or before the ID is the one holding it: holes never overlap.
		h := sort.Search(len(holes), func(j int) bool { return holes[j].First > r.ID }) - 1
		late[i] = cursor.Late{MsgID: r.ID, HoleFirst: holes[h].First}
		byID[r.ID] = r
	}
	var fresh []int64
	var inserted int64
	err := txer.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		if fresh, err = cursor.RecordLate(ctx, tx, late, now); err != nil || len(fresh) == 0 {
			return err
		}
		msgs := make([]queue.NewMessage, len(fresh))
		for i, id := range fresh {
			msgs[i] = queue.NewMessage{MsgID: id, ReceivedAt: byID[id].ReceivedAt, Trace: p.startTrace(id)}
		}
		inserted, err = queue.Enqueue(ctx, tx, msgs, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("enqueue late arrivals: %w", err)
	}
	p.metrics.lateDetected.Add(float64(len(fresh)))
	p.metrics.lateEnqueued.Add(float64(inserted))
	p.metrics.enqueued.Add(float64(inserted))
	for _, id := range fresh {
		// ERROR: the row arrived after its ID was judged a permanent hole, so max-commit-delay
		// is too short for this inbox, and the message is processed out of ID order.
		p.logger.ErrorContext(ctx, "late arrival in a released hole; enqueued out of ID order, ahead of every unfinished larger ID",
			"msg_id", id, "received_at", byID[id].ReceivedAt, "max_commit_delay", p.cfg.MaxCommitDelay)
	}
	return inserted, nil
}
