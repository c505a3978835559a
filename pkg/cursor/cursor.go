// Package cursor holds the SQL of the discovery cursor family: inbox_cursor (the watermark W
// and the hole clock), inbox_hole (ID ranges released as permanent holes) and inbox_late (rows
// found in those ranges afterwards), and the one-time cutover seeding of the cursor (seed.go).
// The R-INGEST and R-SEED rules; docs/ingest.md.
package cursor

import (
	"context"
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Cursor is the persisted discovery state.
type Cursor struct {
	W         int64
	HoleSince *time.Time
	SeededAt  *time.Time
	SeedMode  *string
	SeedValue *int64
	// Violation is the upstream contract violation that stops W; nil when none stands.
	Violation *Violation
	// MarkerSince is since when the inbox's processed markers are msgexchange's own; nil
	// until ingest's first round outside shadow mode (contract.go).
	MarkerSince *time.Time
}

// Load reads the cursor.
func Load(ctx context.Context, q db.Executor) (Cursor, error) { return load(ctx, q, "") }

// LoadForUpdate reads the cursor and locks it for the caller's transaction.
func LoadForUpdate(ctx context.Context, q db.Executor) (Cursor, error) {
	return load(ctx, q, " FOR UPDATE")
}

func load(ctx context.Context, q db.Executor, lock string) (Cursor, error) {
	var c Cursor
	var kind, detail *string
	var since *time.Time
	err := q.QueryRow(ctx, `SELECT w, hole_since, seeded_at, seed_mode, seed_value,
			violation_kind, violation_since, violation_detail, marker_since
		FROM inbox_cursor WHERE id = 1`+lock).
		Scan(&c.W, &c.HoleSince, &c.SeededAt, &c.SeedMode, &c.SeedValue, &kind, &since, &detail, &c.MarkerSince)
	if err != nil {
		return c, fmt.Errorf("load inbox cursor: %w", err)
	}
	if kind != nil && since != nil && detail != nil { // all or none (CHECK inbox_cursor_violation)
		c.Violation = &Violation{Kind: *kind, Since: *since, Detail: *detail}
	}
	return c, nil
}

// Save writes W and the hole clock.
func Save(ctx context.Context, q db.Executor, w int64, holeSince *time.Time, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE inbox_cursor SET w = $1, hole_since = $2, updated_at = $3 WHERE id = 1`, w, holeSince, now)
	if err != nil {
		return fmt.Errorf("save inbox cursor: %w", err)
	}
	return nil
}

// HoleStats summarises the permanent holes for status and metrics.
type HoleStats struct {
	Holes        int64 // released hole ranges
	HoleIDs      int64 // IDs inside them
	LateDetected int64
	LateEnqueued int64
}

// Holes counts the permanent holes and the late arrivals found among them.
func Holes(ctx context.Context, q db.Executor) (HoleStats, error) {
	var s HoleStats
	err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM inbox_hole), (SELECT coalesce(sum(last_id - first_id + 1), 0) FROM inbox_hole),
		(SELECT count(*) FROM inbox_late), (SELECT count(enqueued_at) FROM inbox_late)`).
		Scan(&s.Holes, &s.HoleIDs, &s.LateDetected, &s.LateEnqueued)
	if err != nil {
		return s, fmt.Errorf("count inbox holes: %w", err)
	}
	return s, nil
}

// ReleaseHole records the ID range [first, last] as a permanent hole, to be watched for late
// arrivals.
func ReleaseHole(ctx context.Context, q db.Executor, first, last int64, now time.Time) error {
	_, err := q.Exec(ctx, `INSERT INTO inbox_hole (first_id, last_id, released_at) VALUES ($1, $2, $3)
		ON CONFLICT (first_id) DO NOTHING`, first, last, now)
	if err != nil {
		return fmt.Errorf("release hole %d-%d: %w", first, last, err)
	}
	return nil
}
