package discovery

import (
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/cursor"
)

// A seed skips only the rows visible when it is taken (R-SEED-3). A row whose ID was
// allocated to a transaction still open at seeding time is live traffic: when it commits
// below the seeded W, the late-arrival reconciliation must find it.

func TestMinSeedKeepsARowInFlight(t *testing.T) {
	e := newEnv(t)
	s := cursor.Seed{Mode: cursor.SeedMin}
	e.cfg.Seed = &s
	p := e.poller()
	e.round(p)                  // an empty inbox: the seed waits
	tx, small := e.hold()       // upstream T1: ID allocated, not committed
	big := e.insert(e.my.Admin) // upstream T2: a larger ID, committed first
	e.round(p)                  // seeds W = MIN − 1 and enqueues big
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	e.settle(t, p)
	if q := e.queued(); !slices.Contains(q, small) || !slices.Contains(q, big) {
		t.Errorf("queued %v, want %d (committed after the seed, below W) and %d", q, small, big)
	}
}

func TestMaxSeedKeepsARowInFlight(t *testing.T) {
	e := newEnv(t)
	stock := e.insert(e.my.Admin)
	tx, small := e.hold()
	big := e.insert(e.my.Admin)
	s := cursor.Seed{Mode: cursor.SeedMax}
	e.cfg.Seed = &s
	p := e.poller()
	e.round(p) // seeds W = MAX = big: stock and big are skipped, small is not visible yet
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	e.settle(t, p)
	q := e.queued()
	if !slices.Contains(q, small) {
		t.Errorf("queued %v, want %d, which was in flight when the seed was taken", q, small)
	}
	if slices.Contains(q, stock) || slices.Contains(q, big) {
		t.Errorf("queued %v: the visible stock %d and %d must stay skipped", q, stock, big)
	}
}

// settle runs rounds and reconciliations well past max-commit-delay.
func (e *env) settle(t *testing.T, p *Poller) {
	t.Helper()
	for range 3 {
		e.clk.Advance(10 * time.Minute)
		e.round(p)
		if _, err := p.Reconcile(t.Context(), e.tx); err != nil {
			t.Fatal(err)
		}
	}
}
