package api

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/pkg/queue"
	controlv1 "github.com/msgexchange/msgexchange/proto/msgx/control/v1"
)

// maxOpenHolesShown bounds the holes GetStatus lists (their count is always complete).
const maxOpenHolesShown = 100

// discoveryView is what ingest recorded beyond W (D-15): the rows waiting, the open holes with
// their clocks, and the measured commit delays.
type discoveryView struct {
	disc    cursor.Discovery
	summary cursor.OpenHoleStats
	holes   []cursor.OpenHole
	fills   cursor.FillStats
	lastDue *time.Time
}

func loadDiscoveryView(ctx context.Context, tx pgx.Tx, w int64) (discoveryView, error) {
	var v discoveryView
	var err error
	if v.disc, err = cursor.LoadDiscovery(ctx, tx); err != nil {
		return v, err
	}
	if v.summary, err = cursor.OpenHoleSummary(ctx, tx, w); err != nil {
		return v, err
	}
	all, err := cursor.OpenHoles(ctx, tx, maxOpenHolesShown+1)
	if err != nil {
		return v, err
	}
	for _, h := range all {
		if h.First > w && len(v.holes) < maxOpenHolesShown {
			v.holes = append(v.holes, h)
		}
	}
	var latest *time.Time
	if err := tx.QueryRow(ctx, `SELECT max(seen_at) FROM inbox_open_hole WHERE first_id > $1`, w).Scan(&latest); err != nil {
		return v, err
	}
	if latest != nil {
		due := latest.Add(v.disc.MaxCommitDelay)
		v.lastDue = &due
	}
	v.fills, err = cursor.Fills(ctx, tx)
	return v, err
}

// fill adds the view to the discovery status. maxID is the inbox's largest ID (nil when the
// inbox could not be read): the IDs between what ingest scanned and it count as waiting rows.
func (v discoveryView) fill(d *controlv1.Discovery, w int64, maxID *int64, now time.Time) {
	scanned := max(v.disc.ScannedTo, w)
	d.ScannedTo = scanned
	d.WaitingRows = max(v.disc.WaitingRows, 0)
	if maxID != nil && *maxID > scanned {
		d.WaitingRows += *maxID - scanned
	}
	if v.disc.WaitingSince != nil && d.WaitingRows > 0 {
		d.OldestWaitingAge = durationpb.New(max(now.Sub(*v.disc.WaitingSince), 0))
	}
	d.MaxCommitDelay = durationpb.New(v.disc.MaxCommitDelay)
	d.OpenHoleRanges, d.OpenHoleIds = v.summary.Ranges, v.summary.IDs
	for _, h := range v.holes {
		due := h.SeenAt.Add(v.disc.MaxCommitDelay)
		d.OpenHoles = append(d.OpenHoles, &controlv1.OpenHole{FirstId: h.First, LastId: h.Last, SeenAt: timestamp(h.SeenAt),
			Age: durationpb.New(max(now.Sub(h.SeenAt), 0)), ReleaseAt: timestamp(due)})
	}
	if v.summary.OldestSeen != nil {
		d.NextReleaseAt = timestamp(v.summary.OldestSeen.Add(v.disc.MaxCommitDelay))
	}
	cd := &controlv1.CommitDelay{Fills: v.fills.Count}
	if v.fills.Max != nil {
		cd.Max = durationpb.New(time.Duration(*v.fills.Max * float64(time.Second)))
		cd.MaxAt = optTimestamp(v.fills.MaxAt)
	}
	if p := v.fills.P99; p != nil && *p < 1e300 {
		cd.P99Bound = durationpb.New(time.Duration(*p * float64(time.Second)))
	}
	d.CommitDelay = cd
}

// backlogWithDiscovery is the queue's backlog with the rows discovery still holds: they count
// toward the drain estimate, which cannot end before the last open hole is due (the rows
// behind it cannot be enqueued sooner).
func backlogWithDiscovery(s queue.Statistics, d *controlv1.Discovery, lastDue *time.Time, now time.Time) *controlv1.Backlog {
	b := backlog(s)
	b.WaitingDiscovery = d.GetWaitingRows()
	rows := s.Unfinished + b.WaitingDiscovery
	switch {
	case rows == 0:
		b.EstimatedDrain = durationpb.New(0)
	case s.FinishedPerSecond > 0:
		est := time.Duration(float64(rows) / s.FinishedPerSecond * float64(time.Second))
		if b.WaitingDiscovery > 0 && lastDue != nil {
			est = max(est, lastDue.Sub(now))
		}
		b.EstimatedDrain = durationpb.New(est)
	default:
		b.EstimatedDrain = nil // nothing finished lately: unknown, not zero
	}
	return b
}
