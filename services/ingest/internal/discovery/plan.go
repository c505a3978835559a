package discovery

import (
	"time"

	"github.com/msgexchange/msgexchange/pkg/inbox"
)

// Plan is what one discovery round decided (R-INGEST-1 to R-INGEST-7).
type Plan struct {
	// W is the new watermark: every inbox ID up to it is enqueued or released as a hole.
	W int64
	// HoleSince is when the hole that now stops W was first observed; nil when none does.
	HoleSince *time.Time
	// Enqueue lists the rows up to the new W, in ID order.
	Enqueue []inbox.Row
	// Released is the ID range [first, last] released as a permanent hole this round, if any.
	Released *[2]int64
}

// plan computes the next cursor from the current one and the rows read after W (in ID order).
// It counts the contiguous run from W+1; a gap followed by a row is a hole. A hole seen for
// the first time starts its clock; one older than maxDelay is released — only the missing IDs
// are skipped, never an existing row — and at most one hole is released per round. A hole
// that appears after W moved is a new hole with a new clock.
func plan(w int64, holeSince *time.Time, rows []inbox.Row, now time.Time, maxDelay time.Duration) Plan {
	p := Plan{W: w}
	i := p.extend(rows, 0)
	if i == len(rows) {
		return p // no row after a gap: nothing waits for a hole
	}
	switch {
	case i > 0 || holeSince == nil:
		p.HoleSince = &now
	case now.Sub(*holeSince) >= maxDelay:
		p.Released = &[2]int64{p.W + 1, rows[i].ID - 1}
		p.W = rows[i].ID - 1
		if i = p.extend(rows, i); i < len(rows) {
			p.HoleSince = &now
		}
	default:
		p.HoleSince = holeSince
	}
	return p
}

// extend advances W over the contiguous rows starting at rows[i] and returns the index of the
// first row after a gap (len(rows) when there is none).
func (p *Plan) extend(rows []inbox.Row, i int) int {
	for i < len(rows) && rows[i].ID == p.W+1 {
		p.W++
		p.Enqueue = append(p.Enqueue, rows[i])
		i++
	}
	return i
}

// stopBefore cuts the plan before the existing row id, which may not be enqueued (a contract
// violation, contract.go): W stops at id-1 and only the rows below it are enqueued. A hole
// released beyond the cut is not released, and no hole clock runs, since the row at W+1 then
// exists. A plan whose W is already below id is returned as it is.
func (p Plan) stopBefore(id int64) Plan {
	if id > p.W {
		return p
	}
	out := Plan{W: id - 1}
	for _, r := range p.Enqueue {
		if r.ID < id {
			out.Enqueue = append(out.Enqueue, r)
		}
	}
	if p.Released != nil && p.Released[1] < id {
		out.Released = p.Released
	}
	return out
}
