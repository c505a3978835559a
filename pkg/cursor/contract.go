package cursor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/db"
)

// Upstream contract violations (docs/ingest.md, "Contract violations"). W is only sound while
// the inbox keeps two promises: its IDs only grow (R-INGEST-10), and the processed
// marker is written by msgexchange alone, on rows it enqueued. Ingest checks both every round;
// when one is broken it stops advancing W and records the violation in inbox_cursor, in the
// same transaction as the round's decision. An operator resolves it through control.

// The violation kinds, as inbox_cursor.violation_kind and the API spell them.
const (
	// KindInboxBehind: the inbox's largest ID is below W (a reset AUTO_INCREMENT, a truncated or
	// restored inbox). Rows written now get IDs at or below W, which the scan ID > W never
	// reads.
	KindInboxBehind = "inbox-behind-watermark"
	// KindMarkedAbove: a row above W carries a processed marker written after marker_since.
	// Only our backfill writes markers then, and only on enqueued rows, so the row was
	// processed in a timeline PostgreSQL no longer has (restored from an older backup).
	// Enqueueing it would run its business again (R-INGEST-10).
	KindMarkedAbove = "marked-above-watermark"
)

// Kinds lists the violation kinds.
func Kinds() []string { return []string{KindInboxBehind, KindMarkedAbove} }

// Violation is a standing contract violation.
type Violation struct {
	Kind   string
	Since  time.Time
	Detail string
}

// RecordViolation records v in the caller's transaction: the round that detected it, whose W
// and hole clock (Save) stop before the rows it may not enqueue. A violation already standing
// is kept as it was: the first observation is the one an operator resolves.
func RecordViolation(ctx context.Context, q db.Executor, v Violation) error {
	_, err := q.Exec(ctx, `UPDATE inbox_cursor SET violation_kind = $1, violation_since = $2, violation_detail = $3
		WHERE id = 1 AND violation_kind IS NULL`, v.Kind, v.Since, v.Detail)
	if err != nil {
		return fmt.Errorf("record contract violation %s: %w", v.Kind, err)
	}
	return nil
}

// StartMarkerWatch sets marker_since to now unless it is set: from then on a marker on a row
// above W is a violation. Markers written before (by the system msgexchange replaces, on the
// stock a cutover re-reads) are expected and never judged.
func StartMarkerWatch(ctx context.Context, q db.Executor, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE inbox_cursor SET marker_since = $1 WHERE id = 1 AND marker_since IS NULL`, now)
	if err != nil {
		return fmt.Errorf("start the processed-marker watch: %w", err)
	}
	return nil
}

// Action is an operator's way out of a contract violation.
type Action string

// The actions.
const (
	// ActionResume clears the violation and lets discovery go on from W. For
	// inbox-behind-watermark it is refused while the inbox's largest ID is below W: the fix is
	// upstream's (the AUTO_INCREMENT above W), and resuming before it would lose the rows written
	// meanwhile. For marked-above-watermark it means "process the marked rows again": the
	// operator accepts running their business a second time, and marker_since moves to now so
	// the markers written so far are no longer judged.
	ActionResume Action = "resume"
	// ActionSkipMarked (marked-above-watermark only) moves W over the run of marked rows just
	// above it without enqueueing them: they were processed in the lost timeline, and R-INGEST-10
	// does not run their business again. The run ends before the first unmarked row (or
	// at Through); a later marked row stops W again.
	ActionSkipMarked Action = "skip-marked"
)

// A resolution is refused, changing nothing, with an error wrapping ErrResolveRefused.
var (
	ErrResolveRefused = errors.New("contract violation resolution refused")
	// ErrNoViolation: no violation of the requested kind stands.
	ErrNoViolation = fmt.Errorf("%w: no contract violation of that kind stands", ErrResolveRefused)
	// ErrWrongAction: skip-marked for a violation other than marked-above-watermark.
	ErrWrongAction = fmt.Errorf("%w: skip-marked resolves only %s", ErrResolveRefused, KindMarkedAbove)
	// ErrStillBehind: resume of inbox-behind-watermark while the inbox's largest ID is below W.
	ErrStillBehind = fmt.Errorf("%w: the inbox's largest ID is still below W", ErrResolveRefused)
	// ErrNotMarked: skip-marked up to Through, and a row up to it carries no marker.
	ErrNotMarked = fmt.Errorf("%w: a row up to through carries no processed marker", ErrResolveRefused)
	// ErrNothingToSkip: skip-marked, and the first row above W carries no marker (or there is
	// no row above W).
	ErrNothingToSkip = fmt.Errorf("%w: no marked row directly above W", ErrResolveRefused)
	// ErrResolveRaced: W or the violation changed between the read and the write.
	ErrResolveRaced = fmt.Errorf("%w: the cursor changed since it was read; read the status and try again", ErrResolveRefused)
)

// SkipBatch bounds how many inbox rows one skip-marked passes; a longer run takes more calls.
const SkipBatch = 50000

// ContractReader is what a resolution reads of the shared inbox (aodb.Inbox).
type ContractReader interface {
	MaxID(ctx context.Context) (int64, error)
	MarkStates(ctx context.Context, after, through int64, limit int) ([]aodb.MarkState, error)
}

// Resolution is one operator decision.
type Resolution struct {
	// Kind must be the standing violation's kind: a decision is taken for what was seen.
	Kind   string
	Action Action
	// Through bounds skip-marked: every row up to it must be marked. 0: up to the end of the
	// run of marked rows above W.
	Through int64
	// Limit is the most rows one skip passes; 0 means SkipBatch.
	Limit int
	// Since, when set, must be the standing violation's since: a repeated call never resolves
	// a newer violation of the same kind.
	Since *time.Time
}

func (r Resolution) limit() int {
	if r.Limit > 0 {
		return r.Limit
	}
	return SkipBatch
}

// ResolutionView is what a resolution read: the cursor, then the inbox.
type ResolutionView struct {
	Cursor   Cursor
	InboxMax int64
	// Rows are the rows above W (up to Through, at most the limit), for skip-marked.
	Rows []aodb.MarkState
}

// ReadResolution checks r against the cursor cur (read before) and reads the inbox for it,
// outside any PostgreSQL transaction: the lock connection must not wait on MySQL. A refusal
// wraps ErrResolveRefused; any other error is the inbox's.
func ReadResolution(ctx context.Context, in ContractReader, cur Cursor, r Resolution) (ResolutionView, error) {
	v := ResolutionView{Cursor: cur}
	switch {
	case cur.Violation == nil:
		return v, ErrNoViolation
	case cur.Violation.Kind != r.Kind:
		return v, fmt.Errorf("%w (%s stands, since %s)", ErrNoViolation, cur.Violation.Kind, cur.Violation.Since.UTC().Format(time.RFC3339Nano))
	case r.Since != nil && !r.Since.Equal(cur.Violation.Since):
		return v, fmt.Errorf("%w (the %s standing now was seen at %s, not %s)", ErrNoViolation, cur.Violation.Kind,
			cur.Violation.Since.UTC().Format(time.RFC3339Nano), r.Since.UTC().Format(time.RFC3339Nano))
	case r.Action == ActionSkipMarked && r.Kind != KindMarkedAbove:
		return v, ErrWrongAction
	case r.Action != ActionSkipMarked && r.Action != ActionResume:
		return v, fmt.Errorf("%w: unknown action %q", ErrResolveRefused, r.Action)
	}
	var err error
	if v.InboxMax, err = in.MaxID(ctx); err != nil {
		return v, fmt.Errorf("resolve contract violation: %w", err)
	}
	if r.Action == ActionSkipMarked {
		if v.Rows, err = in.MarkStates(ctx, cur.W, r.Through, r.limit()); err != nil {
			return v, fmt.Errorf("resolve contract violation: %w", err)
		}
	}
	return v, nil
}

// Resolved is what a resolution did (or would do, in a dry run).
type Resolved struct {
	// Before is W when the violation was resolved; W is the watermark after.
	Before, W int64
	// Skipped counts the rows skip-marked passed without enqueueing them.
	Skipped int64
	// FirstUnmarked is the first row above the new W that carries no marker, when the read
	// saw one (it ended the run); 0 otherwise.
	FirstUnmarked int64
	// More: the run of marked rows filled the limit and may go on past W.
	More bool
	// Holes are the ID ranges among the skipped rows that hold no row; they are watched for
	// late arrivals like released holes.
	Holes [][2]int64
	// InboxMax is the inbox's largest ID as read.
	InboxMax int64
}

// PlanResolution decides what r does to the cursor v.Cursor.
func PlanResolution(r Resolution, v ResolutionView) (Resolved, error) {
	w := v.Cursor.W
	res := Resolved{Before: w, W: w, InboxMax: v.InboxMax}
	if r.Action == ActionResume {
		if r.Kind == KindInboxBehind && v.InboxMax < w {
			return res, fmt.Errorf("%w (%d < W %d): have the database team set its AUTO_INCREMENT above %d, then resume once a row above W exists",
				ErrStillBehind, v.InboxMax, w, w)
		}
		return res, nil
	}
	next := w + 1
	for _, row := range v.Rows {
		if !row.Marked {
			res.FirstUnmarked = row.ID
			break
		}
		if row.ID > next {
			res.Holes = append(res.Holes, [2]int64{next, row.ID - 1})
		}
		next = row.ID + 1
		res.W = row.ID
		res.Skipped++
	}
	switch {
	case r.Through != 0 && res.FirstUnmarked != 0:
		hint := "nothing above W is marked before it"
		if res.Skipped > 0 {
			hint = fmt.Sprintf("the marked run ends at %d", res.W)
		}
		return Resolved{Before: w, W: w, InboxMax: v.InboxMax, FirstUnmarked: res.FirstUnmarked},
			fmt.Errorf("%w (row %d, through %d; %s)", ErrNotMarked, res.FirstUnmarked, r.Through, hint)
	case res.Skipped == 0 && res.FirstUnmarked != 0:
		return res, fmt.Errorf("%w (row %d, the first above W %d, is unmarked)", ErrNothingToSkip, res.FirstUnmarked, w)
	case res.Skipped == 0:
		return res, fmt.Errorf("%w (no row above W %d)", ErrNothingToSkip, w)
	}
	res.More = res.FirstUnmarked == 0 && len(v.Rows) == r.limit()
	return res, nil
}

// Resolve applies r to the cursor v was read for, in the caller's transaction: the violation
// is cleared, and W, the hole clock and marker_since change as the action says, by one UPDATE
// whose WHERE re-checks that W and the violation are still the ones read (a round that read the
// cursor before finds it changed and retries). skip-marked records the empty ID ranges it
// passed as released holes. A dry run checks the same and writes nothing.
func Resolve(ctx context.Context, q db.Executor, r Resolution, v ResolutionView, dryRun bool, now time.Time) (Resolved, error) {
	res, err := PlanResolution(r, v)
	if err != nil {
		return res, err
	}
	cur := v.Cursor
	if dryRun {
		var same bool
		err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM inbox_cursor WHERE id = 1 AND w = $1
			AND violation_kind = $2 AND violation_since = $3)`, cur.W, cur.Violation.Kind, cur.Violation.Since).Scan(&same)
		if err != nil {
			return res, fmt.Errorf("check inbox cursor: %w", err)
		}
		if !same {
			return res, ErrResolveRaced
		}
		return res, nil
	}
	resumeMarked := r.Action == ActionResume && r.Kind == KindMarkedAbove
	tag, err := q.Exec(ctx, `UPDATE inbox_cursor SET violation_kind = NULL, violation_since = NULL, violation_detail = NULL,
			w = $4, hole_since = CASE WHEN $4 <> w THEN NULL ELSE hole_since END,
			marker_since = CASE WHEN $5 THEN $6 ELSE marker_since END, updated_at = $6
		WHERE id = 1 AND w = $1 AND violation_kind = $2 AND violation_since = $3`,
		cur.W, cur.Violation.Kind, cur.Violation.Since, res.W, resumeMarked, now)
	if err != nil {
		return res, fmt.Errorf("resolve contract violation: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return res, ErrResolveRaced
	}
	if err := releaseHoles(ctx, q, res.Holes, now); err != nil {
		return res, fmt.Errorf("resolve contract violation: watch the empty IDs skipped: %w", err)
	}
	return res, nil
}

// releaseHoles records ranges as released holes in one statement, however many there are.
func releaseHoles(ctx context.Context, q db.Executor, holes [][2]int64, now time.Time) error {
	if len(holes) == 0 {
		return nil
	}
	first := make([]int64, len(holes))
	last := make([]int64, len(holes))
	for i, h := range holes {
		first[i], last[i] = h[0], h[1]
	}
	_, err := q.Exec(ctx, `INSERT INTO inbox_hole (first_id, last_id, released_at)
		SELECT f, l, $3 FROM unnest($1::bigint[], $2::bigint[]) AS h(f, l)
		ON CONFLICT (first_id) DO NOTHING`, first, last, now)
	if err != nil {
		return fmt.Errorf("release %d holes: %w", len(holes), err)
	}
	return nil
}
