package discovery

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/db"
)

// applySeed applies the configured cutover seed before the first round that may move W. It
// reports ready when discovery may go on: the seed was applied, or refused because the cursor
// is already in use (the configuration is then only a reminder of the original cutover, and
// discovery continues from the persisted W). min and max on an empty inbox wait for its first
// row, since discovering from W = 0 meanwhile would be the zero mode the operator did not
// choose; there is nothing to discover in the meantime.
func (p *Poller) applySeed(ctx context.Context, txer Txer) (ready bool, err error) {
	cur, err := db.TxV(ctx, txer, func(tx pgx.Tx) (cursor.Cursor, error) { return cursor.Load(ctx, tx) })
	if err != nil {
		return false, err
	}
	if cur.SeededAt != nil || cur.W != 0 {
		// Cheap refusals first: a restart of a running system does not read the inbox for them.
		return true, p.seedDone(applyErr(cur))
	}
	view, err := cursor.ReadView(ctx, p.inbox, *p.seed)
	if err != nil {
		p.metrics.readErrors.Inc()
		return false, err
	}
	lo, hi := view.Min, view.Max
	w, err := db.TxV(ctx, txer, func(tx pgx.Tx) (int64, error) {
		return cursor.Apply(ctx, tx, *p.seed, view, p.clock.Now())
	})
	switch {
	case errors.Is(err, cursor.ErrInboxEmpty):
		if !p.waitingSeed {
			p.waitingSeed = true
			p.logger.InfoContext(ctx, "cutover seeding waits for the first inbox row", "cutover_watermark", p.seed.String())
		}
		return false, nil
	case err == nil:
		p.logger.InfoContext(ctx, "cursor seeded for the cutover", "cutover_watermark", p.seed.String(), "w", w,
			"inbox_min_id", lo, "inbox_max_id", hi)
		p.metrics.watermark.Set(float64(w))
		p.seed = nil
		return true, nil
	case errors.Is(err, cursor.ErrSeedRefused):
		return true, p.seedDone(err)
	}
	return false, err
}

// applyErr is the refusal Apply would give for a cursor that is seeded or has moved.
func applyErr(cur cursor.Cursor) error {
	if cur.SeededAt != nil {
		return cursor.ErrAlreadySeeded
	}
	return cursor.ErrCursorMoved
}

// seedDone logs a refused seed and forgets it. A cursor seeded before is the normal restart
// (info); a cursor used without seeding means the configured cutover never happened, which
// the operator must know (error), but discovery goes on from W: it loses nothing.
func (p *Poller) seedDone(refusal error) error {
	if errors.Is(refusal, cursor.ErrAlreadySeeded) {
		p.logger.Info("cursor already seeded; pipeline.cutover-watermark is not applied again",
			"cutover_watermark", p.seed.String())
	} else {
		p.logger.Error("pipeline.cutover-watermark refused; discovery continues from the persisted watermark",
			"cutover_watermark", p.seed.String(), "err", refusal)
	}
	p.seed = nil
	return nil
}
