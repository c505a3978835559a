package cursor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Mode is how a cutover seed chooses the first watermark (R-SEED-1).
type Mode string

// The seeding modes; the values are the ones inbox_cursor.seed_mode accepts.
const (
	// SeedMin reads every row the inbox holds: W = MIN(ID) − 1, so the oldest existing row is
	// the first one discovered and the purged IDs below it are never waited for as a hole.
	SeedMin Mode = "min"
	// SeedZero starts at W = 0 under the hole rules, as an unseeded first start does, but
	// records that the choice was made.
	SeedZero Mode = "zero"
	// SeedMax skips the stock visible at seeding time: W = MAX(ID), so only rows with larger
	// IDs are discovered.
	SeedMax Mode = "max"
	// SeedID sets W to an explicit inbox ID: discovery starts with the row after it.
	SeedID Mode = "id"
)

// Seeding is refused once discovery has begun: a second cutover would either re-enqueue
// messages or skip ones that were never processed, so it must be a deliberate operation on a
// fresh database, never a side effect of a restart with the same configuration.
var (
	// ErrSeedRefused is wrapped by every refusal below.
	ErrSeedRefused = errors.New("cutover seeding refused")
	// ErrAlreadySeeded: inbox_cursor.seeded_at is set.
	ErrAlreadySeeded = fmt.Errorf("%w: the cursor is already seeded", ErrSeedRefused)
	// ErrCursorMoved: the watermark is no longer 0 (discovery has enqueued or released IDs).
	ErrCursorMoved = fmt.Errorf("%w: the watermark has moved", ErrSeedRefused)
	// ErrMessagesExist: proc_state has rows (the queue has been used).
	ErrMessagesExist = fmt.Errorf("%w: proc_state has messages", ErrSeedRefused)
)

// ErrBeyondInbox refuses an explicit watermark above the inbox's largest ID: a typo there would
// skip every future message up to it, and a seed is never retried.
var ErrBeyondInbox = fmt.Errorf("%w: the watermark is above the inbox's largest ID", ErrSeedRefused)

// ErrInboxEmpty means min or max were asked for while the inbox holds no row, so there is
// nothing to take the watermark from. It is not a refusal: the same seed can be applied once
// a row exists.
var ErrInboxEmpty = errors.New("cutover seeding: the inbox is empty, min and max need a row")

// Seed is one cutover choice.
type Seed struct {
	Mode Mode
	ID   int64 // the watermark for SeedID
}

// ParseSeed reads the pipeline.cutover-watermark syntax: min, zero, max or an inbox ID ≥ 0.
func ParseSeed(s string) (Seed, error) {
	switch v := strings.TrimSpace(s); v {
	case string(SeedMin), string(SeedZero), string(SeedMax):
		return Seed{Mode: Mode(v)}, nil
	default:
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 0 {
			return Seed{}, fmt.Errorf("cutover watermark must be min, zero, max or an inbox ID, got %q", s)
		}
		return Seed{Mode: SeedID, ID: id}, nil
	}
}

// String is the seed in ParseSeed's syntax.
func (s Seed) String() string {
	if s.Mode == SeedID {
		return strconv.FormatInt(s.ID, 10)
	}
	return string(s.Mode)
}

// Watermark computes the seeded W from the inbox's smallest and largest ID (0 and 0 when the
// inbox is empty).
func (s Seed) Watermark(inboxMin, inboxMax int64) (int64, error) {
	switch s.Mode {
	case SeedZero:
		return 0, nil
	case SeedID:
		if s.ID < 0 {
			return 0, fmt.Errorf("cutover seeding: negative watermark %d", s.ID)
		}
		if s.ID > inboxMax {
			return 0, fmt.Errorf("%w (%d > %d)", ErrBeyondInbox, s.ID, inboxMax)
		}
		return s.ID, nil
	case SeedMin, SeedMax:
		if inboxMax <= 0 {
			return 0, ErrInboxEmpty
		}
		if s.Mode == SeedMin {
			return inboxMin - 1, nil
		}
		return inboxMax, nil
	}
	return 0, fmt.Errorf("cutover seeding: unknown mode %q", s.Mode)
}

// SeedWindow is how far below a seeded watermark the IDs that are not visible are watched as
// holes. A seed skips only the rows visible when it is taken (R-SEED-3); an ID allocated
// to a transaction that had not committed yet is not stock but live traffic, and would be lost
// if the watermark simply passed it. In-flight IDs are the most recent ones, so a window far
// wider than a day of traffic below W covers them.
const SeedWindow = 10000

// WatchFrom is the first ID of the window below a seeded watermark w whose visible IDs a
// seed reads.
func WatchFrom(w int64) int64 { return max(1, w-SeedWindow+1) }

// InboxReader is what seeding reads of the shared inbox (aodb.Inbox).
type InboxReader interface {
	MinID(ctx context.Context) (int64, error)
	MaxID(ctx context.Context) (int64, error)
	IDsBetween(ctx context.Context, first, last int64) ([]int64, error)
}

// View is what a seed needs to know of the inbox: its bounds, and the IDs visible in the
// window below the watermark the seed will set.
type View struct {
	Min, Max int64
	Visible  []int64
}

// ReadView reads the inbox for s. It runs outside any PostgreSQL transaction: the lock
// connection must not wait on MySQL. A row committed between this read and Apply is either
// above W (discovered) or inside a watched hole (reconciled).
func ReadView(ctx context.Context, in InboxReader, s Seed) (View, error) {
	var v View
	if s.Mode == SeedZero {
		return v, nil
	}
	var err error
	if v.Min, err = in.MinID(ctx); err != nil {
		return v, fmt.Errorf("cutover seeding: read the inbox bounds: %w", err)
	}
	if v.Max, err = in.MaxID(ctx); err != nil {
		return v, fmt.Errorf("cutover seeding: read the inbox bounds: %w", err)
	}
	if s.Mode == SeedMin {
		return v, nil
	}
	w, err := s.Watermark(v.Min, v.Max)
	if err != nil || w == 0 {
		return v, nil // Apply reports the refusal
	}
	if v.Visible, err = in.IDsBetween(ctx, WatchFrom(w), w); err != nil {
		return v, fmt.Errorf("cutover seeding: read the inbox below the watermark: %w", err)
	}
	return v, nil
}

// SeedHoles returns the ID ranges at or below the seeded watermark w that are not visible and
// must be watched for late arrivals like released holes: below the smallest visible ID for
// min (purged IDs never come back, in-flight ones do), and the gaps among visible, the IDs
// visible in [WatchFrom(w), w] in order, for max and an explicit ID.
func SeedHoles(s Seed, w, inboxMin int64, visible []int64) [][2]int64 {
	var holes [][2]int64
	switch {
	case w <= 0 || s.Mode == SeedZero:
		return nil
	case s.Mode == SeedMin:
		if inboxMin <= 1 {
			return nil
		}
		return [][2]int64{{1, inboxMin - 1}}
	}
	next := WatchFrom(w)
	for _, id := range visible {
		if id < next || id > w {
			continue
		}
		if id > next {
			holes = append(holes, [2]int64{next, id - 1})
		}
		next = id + 1
	}
	if next <= w {
		holes = append(holes, [2]int64{next, w})
	}
	return holes
}

// Apply seeds the cursor: W, seed_mode, seed_value and seeded_at are written by one statement
// that also re-checks every refusal, so a discovery round or a second seeding racing with it
// cannot slip in between the check and the write. The hole clock is cleared: a hole observed
// at W = 0 belongs to the unseeded start that the seed replaces. The invisible IDs below the
// new W (SeedHoles) are recorded as released holes in the same transaction, so rows committed
// after the seed are found by the late-arrival reconciliation instead of being lost. q must
// be a transaction for that to be atomic. It returns the seeded W, or an error wrapping
// ErrSeedRefused, ErrInboxEmpty, or the database failure.
func Apply(ctx context.Context, q db.Executor, s Seed, v View, now time.Time) (int64, error) {
	w, err := s.Watermark(v.Min, v.Max)
	if err != nil {
		return 0, err
	}
	tag, err := q.Exec(ctx, `UPDATE inbox_cursor SET w = $1, hole_since = NULL, seeded_at = $2, seed_mode = $3,
			seed_value = $1, updated_at = $2
		WHERE id = 1 AND seeded_at IS NULL AND w = 0 AND NOT EXISTS (SELECT 1 FROM proc_state)`,
		w, now, string(s.Mode))
	if err != nil {
		return 0, fmt.Errorf("seed inbox cursor: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return 0, refusal(ctx, q)
	}
	// The open holes and the scan beyond W belong to the unseeded start too (D-15).
	if _, err := q.Exec(ctx, `DELETE FROM inbox_open_hole`); err != nil {
		return 0, fmt.Errorf("seed inbox cursor: clear the open holes: %w", err)
	}
	if _, err := q.Exec(ctx, `UPDATE inbox_cursor SET scanned_to = $1, waiting_rows = 0, waiting_since = NULL WHERE id = 1`, w); err != nil {
		return 0, fmt.Errorf("seed inbox cursor: reset the scan: %w", err)
	}
	for _, h := range SeedHoles(s, w, v.Min, v.Visible) {
		if err := ReleaseHole(ctx, q, h[0], h[1], now); err != nil {
			return 0, fmt.Errorf("seed inbox cursor: watch the IDs not visible below W: %w", err)
		}
	}
	return w, nil
}

// refusal says why the guarded seeding statement changed nothing.
func refusal(ctx context.Context, q db.Executor) error {
	var seeded, moved, used bool
	err := q.QueryRow(ctx, `SELECT seeded_at IS NOT NULL, w <> 0, EXISTS (SELECT 1 FROM proc_state)
		FROM inbox_cursor WHERE id = 1`).Scan(&seeded, &moved, &used)
	if err != nil {
		return fmt.Errorf("seed inbox cursor: check refusal: %w", err)
	}
	switch {
	case seeded:
		return ErrAlreadySeeded
	case moved:
		return ErrCursorMoved
	case used:
		return ErrMessagesExist
	}
	// The state that refused the write changed before it could be read back.
	return fmt.Errorf("%w: the cursor changed while seeding", ErrSeedRefused)
}
