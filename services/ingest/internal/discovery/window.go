package discovery

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/cursor"
)

// state is what a round reads of PostgreSQL before it reads the inbox.
type state struct {
	cur   cursor.Cursor
	holes []cursor.OpenHole
	disc  cursor.Discovery
}

func loadState(ctx context.Context, tx pgx.Tx) (state, error) {
	var st state
	var err error
	if st.cur, err = cursor.Load(ctx, tx); err != nil {
		return st, err
	}
	if st.holes, err = cursor.OpenHoles(ctx, tx, 0); err != nil {
		return st, err
	}
	st.disc, err = cursor.LoadDiscovery(ctx, tx)
	return st, err
}

// readWindow reads what the round needs beyond its batch (D-15). Only a full batch can leave
// rows unread, and only a batch that W cannot cross (a gap in it) makes them wait; then the
// round reads one more page of IDs after what earlier rounds scanned, within HoleWindow of W,
// so each hole's clock starts near its own first sighting, and looks up the open holes
// already seen beyond the batch (at most aodb.MaxRanges of them), so a late commit there
// is seen (and measured) when it happens. Both are primary-key range reads of bounded size;
// the cost follows the rows arriving, not the window's size.
func (p *Poller) readWindow(ctx context.Context, st state, rows []aodb.Row) (Input, error) {
	in := Input{W: st.cur.W, Holes: st.holes, ScannedTo: st.disc.ScannedTo, LegacyHoleSince: st.cur.HoleSince, Rows: rows,
		Full: len(rows) == p.cfg.ClaimBatch && len(rows) > 0}
	if !in.Full {
		return in, nil
	}
	last := rows[len(rows)-1].ID
	if last-in.W == int64(len(rows)) {
		return in, nil // no gap: W crosses the whole batch, and the next round goes on at once
	}
	from := max(in.ScannedTo, last)
	if limit := in.W + HoleWindow; from < limit {
		ids, err := p.inbox.IDsAfter(ctx, from, limit, p.cfg.ClaimBatch)
		if err != nil {
			return in, fmt.Errorf("scan the hole window: %w", err)
		}
		in.Beyond = ids
	}
	var ranges [][2]int64
	for _, h := range st.holes {
		if h.Last > last && h.First <= in.ScannedTo && len(ranges) < aodb.MaxRanges {
			ranges = append(ranges, [2]int64{max(h.First, last+1), h.Last})
		}
	}
	if len(ranges) > 0 {
		found, err := p.inbox.InRanges(ctx, ranges, last, p.cfg.ClaimBatch)
		if err != nil {
			return in, fmt.Errorf("look up the open holes beyond the batch: %w", err)
		}
		for _, r := range found {
			in.Filled = append(in.Filled, r.ID)
		}
	}
	return in, nil
}

// sightings remembers, for the age of the oldest row waiting beyond W, when each largest
// inbox ID was first seen: "at time At, every ID up to ID was allocated and the rows among
// them visible". The first sighting of a row is the first entry whose ID reaches it. It is
// kept apart from the hole clocks, so the alert on it (MsgxIngestRowsWaiting) would also see
// rows held by holes released one after another. In memory; a new process resumes it from
// the persisted clocks: each open hole's sighting proves the row after it was visible then,
// and waiting_since that a row after W was.
type sightings struct {
	entries []sighting
	resumed bool
}

type sighting struct {
	at time.Time
	id int64
}

// maxSightings bounds the memory: one entry per round that saw the largest ID grow, dropped
// once W has passed it.
const maxSightings = 100_000

func (s *sightings) resume(st state) {
	if s.resumed {
		s.prune(st.cur.W)
		return
	}
	s.resumed = true
	for _, h := range above(st.holes, st.cur.W) {
		s.entries = append(s.entries, sighting{h.SeenAt, h.Last + 1})
	}
	if st.disc.WaitingSince != nil {
		s.entries = append(s.entries, sighting{*st.disc.WaitingSince, st.cur.W + 1})
	}
	sort.SliceStable(s.entries, func(i, j int) bool { return s.entries[i].at.Before(s.entries[j].at) })
	// The largest ID only grows with time: an earlier entry with a larger ID makes a later,
	// smaller one say nothing new.
	for i := 1; i < len(s.entries); i++ {
		s.entries[i].id = max(s.entries[i].id, s.entries[i-1].id)
	}
}

func (s *sightings) see(now time.Time, maxID int64) {
	if n := len(s.entries); n > 0 && s.entries[n-1].id >= maxID {
		return
	}
	if len(s.entries) >= maxSightings {
		s.entries = slices.Delete(s.entries, 0, len(s.entries)/2)
	}
	s.entries = append(s.entries, sighting{now, maxID})
}

// prune drops the entries W has passed: every row they prove visible is enqueued.
func (s *sightings) prune(w int64) {
	i := sort.Search(len(s.entries), func(i int) bool { return s.entries[i].id > w })
	s.entries = slices.Delete(s.entries, 0, i)
}

// oldestWaiting is when the oldest row still waiting beyond the plan's W was first seen: the
// first row of the batch above it, or the row after it when the batch was full or the inbox
// has rows above it; nil when no row waits.
func (s *sightings) oldestWaiting(pl Plan, rows []aodb.Row, maxID int64, maxKnown bool) *time.Time {
	first := int64(0)
	for _, r := range rows {
		if r.ID > pl.W {
			first = r.ID
			break
		}
	}
	if first == 0 && (pl.WaitingRows > 0 || (maxKnown && maxID > pl.W)) {
		first = pl.W + 1
	}
	if first == 0 {
		return nil
	}
	i := sort.Search(len(s.entries), func(i int) bool { return s.entries[i].id >= first })
	if i == len(s.entries) {
		return nil // not seen by a MaxID yet (the read failed): unknown, not old
	}
	at := s.entries[i].at
	return &at
}
