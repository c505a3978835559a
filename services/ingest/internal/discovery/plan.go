package discovery

import (
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/cursor"
)

// The scan window: how far beyond its batch a round looks for holes (R-INGEST-4, D-15). A hole
// can only be released by a round whose batch holds the row after it, but its clock starts
// when any round first sees it, so the window is what lets a burst of holes wait once. It is
// bounded: at most HoleWindow IDs above W and MaxOpenHoles ranges. Past the bound a hole is
// first seen when the window reaches it, so it waits longer than max-commit-delay, never
// shorter; GetStatus shows scanned_to and the rows visible beyond it.
const (
	HoleWindow   = 100_000
	MaxOpenHoles = 10_000
)

// Input is what a round read: the persisted cursor, its open holes, and the inbox.
type Input struct {
	W int64
	// Holes are the open holes as loaded, in ID order (a stale one at or below W is dropped).
	Holes []cursor.OpenHole
	// ScannedTo: every ID in (W, ScannedTo] was looked at by earlier rounds.
	ScannedTo int64
	// LegacyHoleSince is the single hole clock of a cursor written before the clocks per hole
	// (migration 00019): it belongs to the hole at W+1, which keeps it.
	LegacyHoleSince *time.Time
	// Rows are the batch after W, in ID order; Full says it was claim-batch long.
	Rows []aodb.Row
	Full bool
	// Beyond are IDs visible after max(ScannedTo, the batch's last row), read only with a full
	// batch; Filled are IDs found inside the open holes beyond the batch.
	Beyond []int64
	Filled []int64
	Now    time.Time
	Delay  time.Duration
}

// Plan is what one discovery round decided (R-INGEST-1 to R-INGEST-7).
type Plan struct {
	// W is the new watermark: every inbox ID up to it is enqueued or released as a hole.
	W int64
	// HoleSince is the first sighting of the hole that now stops W; nil when none does.
	HoleSince *time.Time
	// Enqueue lists the rows up to the new W, in ID order.
	Enqueue []aodb.Row
	// Released are the ID ranges [first, last] released as permanent holes this round.
	Released [][2]int64
	// Holes are the open holes above the new W, each with its own first sighting.
	Holes []cursor.OpenHole
	// ScannedTo: every ID in (W, ScannedTo] has been looked at.
	ScannedTo int64
	// WaitingRows are the rows visible in (W, ScannedTo], not enqueued.
	WaitingRows int64
	// Fills are the measured commit delays (seconds): for each ID that appeared inside an
	// open hole, the time since the hole was first seen.
	Fills []float64
	// Capped: the window bound stopped the scan beyond the batch.
	Capped bool
}

// plan computes the next cursor (R-INGEST-4 to R-INGEST-6, D-15). Each missing ID below a
// visible larger ID is a hole with its own clock, started by the first round that saw it; a
// hole keeps that clock while it stays missing, however W moves. W extends over the
// contiguous rows of the batch and over every hole of the batch that is at least the delay
// old, in ID order, and stops at the first younger one: no row after it is enqueued, and
// only missing IDs are ever released, never an existing row. Holes beyond the batch are only
// watched: the batch must hold the row after a hole to prove its IDs are still missing now.
func plan(in Input) Plan {
	old := above(in.Holes, in.W)
	last := in.W
	if n := len(in.Rows); n > 0 {
		last = in.Rows[n-1].ID
	}
	var open []cursor.OpenHole
	var fills []float64
	capped := false
	legacy := len(old) == 0 && in.LegacyHoleSince != nil
	prev := in.W
	for _, r := range in.Rows {
		if r.ID > prev+1 {
			seen := in.Now
			if legacy && prev == in.W {
				seen = *in.LegacyHoleSince
			}
			open = append(open, split(old, prev+1, r.ID-1, seen)...)
		}
		if h, ok := find(old, r.ID); ok {
			fills = append(fills, in.Now.Sub(h.SeenAt).Seconds())
		}
		prev = r.ID
	}
	scanned := last
	if in.Full {
		// What earlier rounds saw beyond the batch stays open, minus the IDs that appeared.
		for _, h := range old {
			if h.Last <= last || h.First > in.ScannedTo {
				continue
			}
			h.First = max(h.First, last+1)
			for _, id := range in.Filled {
				if id >= h.First && id <= h.Last {
					fills = append(fills, in.Now.Sub(h.SeenAt).Seconds())
				}
			}
			open = append(open, minus(h, in.Filled)...)
		}
		scanned = max(scanned, in.ScannedTo)
		at := scanned
		for _, id := range in.Beyond {
			if id <= at {
				continue
			}
			if id > at+1 {
				if len(open) >= MaxOpenHoles {
					capped = true
					break
				}
				open = append(open, cursor.OpenHole{First: at + 1, Last: id - 1, SeenAt: in.Now})
			}
			at = id
		}
		scanned = at
	}

	p := Plan{W: in.W, Fills: fills, Capped: capped}
	i, j := 0, 0
	for {
		i = p.extend(in.Rows, i)
		// Release in the batch only (h.Last < last): the row after the hole is in the batch,
		// so its IDs are proved missing by this round's read.
		if j < len(open) && open[j].First == p.W+1 && open[j].Last < last && in.Now.Sub(open[j].SeenAt) >= in.Delay {
			p.Released = append(p.Released, [2]int64{open[j].First, open[j].Last})
			p.W = open[j].Last
			j++
			continue
		}
		break
	}
	p.Holes = open[j:]
	p.ScannedTo = max(scanned, p.W)
	p.WaitingRows = p.ScannedTo - p.W
	for _, h := range p.Holes {
		p.WaitingRows -= h.IDs()
	}
	if len(p.Holes) > 0 && p.Holes[0].First == p.W+1 {
		at := p.Holes[0].SeenAt
		p.HoleSince = &at
	}
	return p
}

// above drops the holes at or below w and trims one that straddles it.
func above(holes []cursor.OpenHole, w int64) []cursor.OpenHole {
	var out []cursor.OpenHole
	for _, h := range holes {
		if h.Last <= w {
			continue
		}
		h.First = max(h.First, w+1)
		out = append(out, h)
	}
	return out
}

// find returns the open hole that holds id.
func find(holes []cursor.OpenHole, id int64) (cursor.OpenHole, bool) {
	for _, h := range holes {
		if id >= h.First && id <= h.Last {
			return h, true
		}
		if h.First > id {
			break
		}
	}
	return cursor.OpenHole{}, false
}

// split is the gap [a, b] as open holes: the parts earlier rounds saw keep their clocks, the
// rest is seen now (a new hole never inherits an older hole's waiting time, R-INGEST-6).
func split(old []cursor.OpenHole, a, b int64, now time.Time) []cursor.OpenHole {
	var out []cursor.OpenHole
	next := a
	for _, h := range old {
		if h.Last < next || h.First > b {
			continue
		}
		if h.First > next {
			out = append(out, cursor.OpenHole{First: next, Last: h.First - 1, SeenAt: now})
		}
		f, l := max(h.First, next), min(h.Last, b)
		out = append(out, cursor.OpenHole{First: f, Last: l, SeenAt: h.SeenAt})
		next = l + 1
	}
	if next <= b {
		out = append(out, cursor.OpenHole{First: next, Last: b, SeenAt: now})
	}
	return out
}

// minus is h without the IDs in ids (which appeared), each part keeping h's clock.
func minus(h cursor.OpenHole, ids []int64) []cursor.OpenHole {
	out := []cursor.OpenHole{h}
	for _, id := range ids {
		var next []cursor.OpenHole
		for _, p := range out {
			if id < p.First || id > p.Last {
				next = append(next, p)
				continue
			}
			if id > p.First {
				next = append(next, cursor.OpenHole{First: p.First, Last: id - 1, SeenAt: p.SeenAt})
			}
			if id < p.Last {
				next = append(next, cursor.OpenHole{First: id + 1, Last: p.Last, SeenAt: p.SeenAt})
			}
		}
		out = next
	}
	return out
}

// extend advances W over the contiguous rows starting at rows[i] and returns the index of the
// first row after a gap (len(rows) when there is none).
func (p *Plan) extend(rows []aodb.Row, i int) int {
	for i < len(rows) && rows[i].ID == p.W+1 {
		p.W++
		p.Enqueue = append(p.Enqueue, rows[i])
		i++
	}
	return i
}

// stopBefore cuts the plan before the existing row id, which may not be enqueued (a contract
// violation, contract.go): W stops at id-1 and only the rows below it are enqueued. A hole
// released beyond the cut is not released; the open holes are dropped (discovery stops until
// an operator resolves the violation, and the holes are seen again afterwards, with new
// clocks: they wait longer, never shorter). A plan whose W is already below id is returned as
// it is.
func (p Plan) stopBefore(id int64) Plan {
	if id > p.W {
		return p
	}
	out := Plan{W: id - 1, ScannedTo: id - 1, Fills: p.Fills}
	for _, r := range p.Enqueue {
		if r.ID < id {
			out.Enqueue = append(out.Enqueue, r)
		}
	}
	for _, r := range p.Released {
		if r[1] < id {
			out.Released = append(out.Released, r)
		}
	}
	return out
}
