package discovery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/cursor"
)

// (f) The configured cutover seed, applied by the first round on a stocked inbox whose oldest
// rows were purged (MIN(ID) > 1).
func TestConfiguredSeed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		seed string
		// want computes the expected W right after seeding and the rows the first round
		// enqueues, from the stock IDs (the first two of five were purged).
		wantW     func(ids []int64) int64
		wantQueue func(ids []int64) []int64
		wantHole  bool
	}{
		{seed: "min", wantW: func(ids []int64) int64 { return ids[4] },
			wantQueue: func(ids []int64) []int64 { return ids[2:] }},
		{seed: "max", wantW: func(ids []int64) int64 { return ids[4] },
			wantQueue: func([]int64) []int64 { return nil }},
		{seed: "zero", wantW: func([]int64) int64 { return 0 },
			wantQueue: func([]int64) []int64 { return nil }, wantHole: true},
		{seed: "id", wantW: func(ids []int64) int64 { return ids[4] },
			wantQueue: func(ids []int64) []int64 { return ids[4:] }},
	}
	for _, tt := range tests {
		t.Run(tt.seed, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var ids []int64
			for range 5 {
				ids = append(ids, e.insert(e.my.Admin))
			}
			if _, err := e.my.Admin.ExecContext(t.Context(), `DELETE FROM cminmsgs WHERE CMINMSGS_ID <= ?`, ids[1]); err != nil {
				t.Fatal(err)
			}
			seed := tt.seed
			if seed == "id" {
				seed = itoa(ids[3])
			}
			s, err := cursor.ParseSeed(seed)
			if err != nil {
				t.Fatal(err)
			}
			e.cfg.Seed = &s
			p := e.poller()
			e.round(p)
			c := e.cursor()
			if c.SeededAt == nil || !c.SeededAt.Equal(t0) || *c.SeedMode != string(s.Mode) {
				t.Fatalf("cursor not seeded: %+v", c)
			}
			e.wantW(tt.wantW(ids))
			e.wantQueued(tt.wantQueue(ids)...)
			if (c.HoleSince != nil) != tt.wantHole {
				t.Errorf("hole_since = %v, want a hole: %v", c.HoleSince, tt.wantHole)
			}
			// New rows after the seed are discovered as usual.
			next := e.insert(e.my.Admin)
			e.round(p)
			if !tt.wantHole {
				e.wantW(next)
			}
			// A restart with the same configuration does not seed again.
			e.clk.Advance(time.Hour)
			e.round(e.poller())
			if c2 := e.cursor(); !c2.SeededAt.Equal(t0) {
				t.Errorf("seeded again at %v", c2.SeededAt)
			}
			if !strings.Contains(e.logs.String(), "already seeded") {
				t.Errorf("the restart did not log the ignored seed")
			}
		})
	}
}

func itoa(n int64) string { return cursor.Seed{Mode: cursor.SeedID, ID: n}.String() }

// min and max on an empty inbox wait for its first row instead of discovering from 0.
func TestSeedWaitsForTheFirstRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := cursor.Seed{Mode: cursor.SeedMin}
	e.cfg.Seed = &s
	p := e.poller()
	e.round(p)
	if c := e.cursor(); c.SeededAt != nil {
		t.Fatalf("seeded on an empty inbox: %+v", c)
	}
	purged := e.insert(e.my.Admin)
	first := e.insert(e.my.Admin)
	if _, err := e.my.Admin.ExecContext(t.Context(), `DELETE FROM cminmsgs WHERE CMINMSGS_ID = ?`, purged); err != nil {
		t.Fatal(err)
	}
	e.round(p)
	e.wantW(first)
	e.wantQueued(first)
	if c := e.cursor(); c.SeededAt == nil || *c.SeedValue != first-1 {
		t.Errorf("cursor = %+v, want seeded at W = %d", c, first-1)
	}
}

// A configured seed on a cursor already in use is refused with an ERROR, and discovery goes on
// from the persisted W without reading or skipping anything.
func TestSeedRefusedOnAUsedCursor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.insert(e.my.Admin)
	e.round(e.poller())
	e.wantW(a)
	s := cursor.Seed{Mode: cursor.SeedMax}
	e.cfg.Seed = &s
	p := e.poller()
	b := e.insert(e.my.Admin)
	e.round(p)
	e.wantW(b)
	e.wantQueued(a, b)
	if c := e.cursor(); c.SeededAt != nil {
		t.Errorf("a used cursor was seeded: %+v", c)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "refused") {
		t.Errorf("no ERROR about the refused seed:\n%s", logs)
	}
	if p.seed != nil {
		t.Error("the refused seed is tried again")
	}
	if !errors.Is(applyErr(e.cursor()), cursor.ErrCursorMoved) {
		t.Error("applyErr does not classify a moved cursor")
	}
}

// hookTxer runs before(n) ahead of the n-th transaction: another writer acting between the
// round's read of the cursor and its write.
type hookTxer struct {
	Txer
	calls  int
	before func(n int)
}

func (h *hookTxer) Tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	h.calls++
	h.before(h.calls)
	return h.Txer.Tx(ctx, fn)
}

// A cutover seeding (control) that lands while a round is between its inbox read and its write
// makes the round change nothing: the rows it read are below the seeded W.
// Guards R-INV-2.
func TestSeedDuringARoundWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 3 {
		e.insert(e.my.Admin)
	}
	tx := &hookTxer{Txer: e.tx, before: func(n int) {
		if n == 2 {
			if _, err := cursor.Apply(t.Context(), e.pg.Pool, cursor.Seed{Mode: cursor.SeedMax}, cursor.View{Min: 1, Max: 3}, t0); err != nil {
				t.Errorf("seed: %v", err)
			}
		}
	}}
	p := e.poller()
	if _, err := p.Round(t.Context(), tx); err == nil {
		t.Fatal("a round whose cursor was seeded meanwhile succeeded")
	}
	e.wantW(3)
	e.wantQueued()
	e.round(p)
	e.wantQueued()
}
