package flightstore

import (
	"context"
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Outcomes of a schedule trail row.
const (
	// SnapApplied: the package was planned and every batch committed.
	SnapApplied = "APPLIED"
	// SnapRefused: the whole-package check or the cross-day check refused it; nothing written.
	SnapRefused = "REFUSED"
	// SnapReprojected: the package had committed in an earlier run; this run only re-projected.
	SnapReprojected = "REPROJECTED"
)

// SnapLog is one schd_snap_log row: what one run of a schedule snapshot did.
type SnapLog struct {
	MsgID int64
	STYP  string
	// Records is the number of FLTR the package carries (not the declared RECS, which a refused
	// package may have inflated).
	Records int
	// Applied counts the flights written with a new state other than a deletion, Deleted the
	// flights this run deleted (omitted, cascaded), Unchanged the flights found already at their
	// snapshot state (projected only). A run that refused or only re-projected leaves them nil.
	Applied, Deleted, Unchanged, Batches *int
	// Scope is the operation days the package replaced, ascending.
	Scope   []time.Time
	Outcome string
	Reason  string
	At      time.Time
}

// AppendSnapLog appends a schedule trail row (R-SCHD-7). It runs outside the
// business transactions: a crash may lose the row, never the state (R-TX-7).
func AppendSnapLog(ctx context.Context, q db.Executor, l SnapLog) error {
	// No scope (a package refused before its days were known) is NULL, not an empty list.
	var days []string
	for _, d := range l.Scope {
		days = append(days, d.Format(time.DateOnly))
	}
	var first, last *string
	if len(days) > 0 {
		first, last = &days[0], &days[len(days)-1]
	}
	if _, err := q.Exec(ctx, `INSERT INTO schd_snap_log (msg_id, styp, recs, applied, deleted, unchanged, batches,
			scope_start, scope_end, scope_days, outcome, reason, recv_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8::date, $9::date, $10::date[], $11, nullif($12, ''), $13)`,
		l.MsgID, l.STYP, l.Records, l.Applied, l.Deleted, l.Unchanged, l.Batches, first, last, days, l.Outcome, l.Reason, l.At); err != nil {
		return fmt.Errorf("append schedule trail of %d: %w", l.MsgID, err)
	}
	return nil
}
