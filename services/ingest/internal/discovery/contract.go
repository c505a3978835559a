package discovery

import (
	"context"
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/cursor"
)

// checkContract judges, before anything is written, whether the round may advance W as pl
// says (docs/ingest.md, "Contract violations"). Both checks are cheap and bounded:
//
//   - An empty batch is the only case in which the inbox can be behind W, and one MAX(ID)
//     (an index dive) says whether it is: W is always at or below an ID that existed when it
//     was decided, and IDs only grow, so a largest ID below W means the inbox's IDs went back.
//   - A non-empty batch is checked for processed markers written since marker_since, by one
//     primary-key range query over the batch's IDs (LIMIT 1), never in the scan's predicate
//     (R-INGEST-2). Only the rows one round read are judged, so the cost follows claim-batch;
//     the first rows above W are the ones a restore from an older backup leaves marked.
//
// It returns the plan cut before the first marked row and the violation to record, or an
// error when the inbox could not be read (the round then changes nothing).
func (p *Poller) checkContract(ctx context.Context, cur cursor.Cursor, rows []aodb.Row, pl Plan, now time.Time) (Plan, *cursor.Violation, error) {
	if len(rows) == 0 {
		max, err := p.inbox.MaxID(ctx)
		if err != nil {
			return pl, nil, fmt.Errorf("check the inbox's largest ID: %w", err)
		}
		if max >= cur.W {
			return pl, nil, nil
		}
		return pl, &cursor.Violation{Kind: cursor.KindInboxBehind, Since: now, Detail: fmt.Sprintf(
			"the inbox's largest ID %d is below W %d: its IDs went back (a reset AUTO_INCREMENT, a truncated or restored inbox), "+
				"and rows written with IDs at or below %d would never be discovered", max, cur.W, cur.W)}, nil
	}
	if p.cfg.Shadow || cur.MarkerSince == nil {
		return pl, nil, nil
	}
	id, at, found, err := p.inbox.FirstMarkedSince(ctx, cur.W, rows[len(rows)-1].ID, *cur.MarkerSince)
	if err != nil {
		return pl, nil, fmt.Errorf("check processed markers above W: %w", err)
	}
	if !found {
		return pl, nil, nil
	}
	pl = pl.stopBefore(id)
	return pl, &cursor.Violation{Kind: cursor.KindMarkedAbove, Since: now, Detail: fmt.Sprintf(
		"inbox row %d above W %d already carries the processed marker (written %s, after the marker watch began %s): "+
			"it was processed in a timeline PostgreSQL no longer has (restored from an older backup?); W stops before it",
		id, pl.W, at.UTC().Format(time.RFC3339), cur.MarkerSince.UTC().Format(time.RFC3339))}, nil
}

// stillStanding is a round under a standing violation: nothing is read but the lag (negative
// while the inbox is behind W), nothing is written, and the stop is logged once per process.
func (p *Poller) stillStanding(ctx context.Context, cur cursor.Cursor) {
	p.metrics.watermark.Set(float64(cur.W))
	// W is stopped by the violation, not by a hole: a hole clock left running would page
	// MsgxIngestHoleStuck as well, for a hole that cannot be released until the resolution.
	p.metrics.holeAge.Set(0)
	p.observeLag(ctx, cur.W)
	v := cur.Violation
	// The kind is enough: p.standing is cleared by the first round that finds a violation
	// resolved, so a new one is always logged.
	if p.standing != nil && p.standing.Kind == v.Kind {
		return
	}
	p.standing = v
	p.logger.ErrorContext(ctx, "upstream contract violation stands: discovery does not advance the watermark until an operator resolves it (docs/runbooks.md)",
		"kind", v.Kind, "since", v.Since, "w", cur.W, "detail", v.Detail)
}

// showViolation sets msgx_ingest_contract_violation: 1 for the standing kind, 0 for the others.
func (p *Poller) showViolation(v *cursor.Violation) {
	for _, k := range cursor.Kinds() {
		val := 0.0
		if v != nil && v.Kind == k {
			val = 1
		}
		p.metrics.violation.WithLabelValues(k).Set(val)
	}
}
