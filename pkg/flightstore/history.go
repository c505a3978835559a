package flightstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/flight"
)

// HistoryPolicy is the history rule of R-RETAIN-4: a flight leaves the current
// state only when its operation day is past the retention (a necessary condition, never a
// sufficient one: "运营日过去不等于航班结束") and there is evidence that it is over: it was
// deleted, it has an actual time (ACTT), it was cancelled (CNCL), or it has been quiet (no
// update) for QuietPeriod. A flight without an operation day is moved only when it was deleted
// more than Retention ago: with no day to measure from, only a deletion is evidence enough.
type HistoryPolicy struct {
	Retention   time.Duration // flight.history-retention, whole days
	QuietPeriod time.Duration // flight.quiet-period
	Zone        *time.Location
}

// dayCutoff is the first operation day that is still kept: days strictly before it are past
// the retention. Operation days are dates in the airport zone.
func (p HistoryPolicy) dayCutoff(now time.Time) string {
	local := now.In(p.Zone)
	today := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	return today.Add(-p.Retention).Format(time.DateOnly)
}

// over is the policy's test on the flight_schd row aliased a; never NULL.
func over(a string) string {
	return strings.ReplaceAll(`coalesce((a.operation_day < $1::date
	  AND (a.state = 'DELETED' OR a.actt IS NOT NULL OR a.cncl IS NOT NULL OR a.updated_at < $2))
	 OR (a.operation_day IS NULL AND a.state = 'DELETED' AND a.deleted_at < $3), false)`, "a.", a+".")
}

// historyPredicate selects the flights that may move to history, as code-share groups
// (R-CODESHARE-4 allows no half state between a master and its children, and the master's MAFL is
// derived from its children): a child whose master is still current moves only with its
// master, and a master moves, with all its children, only when every one of them is over too.
// A child whose MAID names no current flight (dangling, or its master already moved) moves
// alone.
//
// A group whose last change came from a message that is still unfinished stays: the pump
// releases the pipeline lock when a step stops between ① and ③ (a Redis failure, a failed ③,
// a crash, a lost lock), and that message's re-run must find the flights it changed. Every
// flight a message writes carries its msg_id in last_msg_id.
func historyPredicate() string {
	return over("f") + `
	AND NOT EXISTS (SELECT 1 FROM flight_schd m WHERE m.flid = f.maid AND f.maid <> f.flid)
	AND NOT EXISTS (SELECT 1 FROM flight_schd c WHERE c.maid = f.flid AND c.flid <> f.flid AND NOT ` + over("c") + `)
	AND NOT EXISTS (SELECT 1 FROM proc_state p WHERE p.msg_id = f.last_msg_id AND p.state IN ('PENDING', 'FAILED'))
	AND NOT EXISTS (SELECT 1 FROM flight_schd c JOIN proc_state p ON p.msg_id = c.last_msg_id
		WHERE c.maid = f.flid AND c.flid <> f.flid AND p.state IN ('PENDING', 'FAILED'))`
}

func (p HistoryPolicy) args(now time.Time) []any {
	return []any{p.dayCutoff(now), now.Add(-p.QuietPeriod), now.Add(-p.Retention)}
}

// HistoryCandidates returns up to limit FLIDs that the policy lets move to history, oldest
// operation day first. It takes no lock: Archive re-checks each one under the pipeline lock.
func HistoryCandidates(ctx context.Context, q db.Executor, p HistoryPolicy, now time.Time, limit int) ([]string, error) {
	args := append(p.args(now), limit)
	rows, err := q.Query(ctx, `SELECT f.flid FROM flight_schd f WHERE `+historyPredicate()+`
		ORDER BY f.operation_day NULLS FIRST, f.flid LIMIT $4`, args...)
	if err != nil {
		return nil, fmt.Errorf("history candidates: %w", err)
	}
	flids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("history candidates: %w", err)
	}
	return flids, nil
}

// Archive moves one flight and its code-share children to flight_history in the caller's
// transaction, which must hold the pipeline lock (LockPipelineTx) so that no processing step of
// the pump is between its load and its write. It re-checks the policy on the locked rows,
// writes each full state (the JSON of flight.Flight: scalars, collections, raw content, version
// and bookkeeping) to flight_history, and only then deletes it (its detail rows go with it, ON
// DELETE CASCADE). If a history write fails the error is returned, and the caller's rollback
// keeps every flight of the group (R-RETAIN-5: history failure deletes zero rows).
//
// It returns the archived states, children first, or none when the flight no longer
// qualifies (updated, deleted or already archived meanwhile).
func Archive(ctx context.Context, tx pgx.Tx, p HistoryPolicy, flid string, now time.Time) ([]flight.Flight, error) {
	var locked string
	err := tx.QueryRow(ctx, `SELECT f.flid FROM flight_schd f WHERE f.flid = $4 AND `+historyPredicate()+` FOR UPDATE`,
		append(p.args(now), flid)...).Scan(&locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock flight %s for history: %w", flid, err)
	}
	rows, err := tx.Query(ctx, `SELECT flid FROM flight_schd WHERE maid = $1 AND flid <> $1 ORDER BY flid FOR UPDATE`, flid)
	if err != nil {
		return nil, fmt.Errorf("lock children of %s for history: %w", flid, err)
	}
	group, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("lock children of %s for history: %w", flid, err)
	}
	var out []flight.Flight
	for _, id := range append(group, flid) {
		f, err := archiveOne(ctx, tx, id, now)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func archiveOne(ctx context.Context, tx pgx.Tx, flid string, now time.Time) (flight.Flight, error) {
	f, err := Load(ctx, tx, flid, false)
	if err != nil {
		return flight.Flight{}, err
	}
	if f == nil {
		return flight.Flight{}, fmt.Errorf("archive flight %s: %w", flid, db.ErrNotFound)
	}
	snapshot, err := json.Marshal(f)
	if err != nil {
		return flight.Flight{}, fmt.Errorf("history snapshot of %s: %w", flid, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO flight_history (flid, state_version, state, operation_day, snapshot, archived_at)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6)`, f.FLID, f.Version, f.State, f.OperationDay, string(snapshot), now); err != nil {
		return flight.Flight{}, fmt.Errorf("write history of %s v%d: %w", flid, f.Version, err)
	}
	tag, err := tx.Exec(ctx, `DELETE FROM flight_schd WHERE flid = $1 AND state_version = $2`, flid, f.Version)
	if err != nil {
		return flight.Flight{}, fmt.Errorf("delete archived flight %s: %w", flid, err)
	}
	if tag.RowsAffected() != 1 {
		return flight.Flight{}, fmt.Errorf("delete archived flight %s: %d rows at version %d", flid, tag.RowsAffected(), f.Version)
	}
	return *f, nil
}

// Archived is what the history sweep left of a FLID it moved out: Floor, the version of the
// tombstone it published (its last archived version plus one), and LastMsg, the last message
// of the flight it moved. Both are 0 when the FLID was never archived. A flight created again
// for the FLID starts above Floor (flight.Input.VersionFloor): consumers order by (FLID,
// STATE_VERSION), the KAFKA:schd row only takes a version not older than the stored one, and
// flight_history's key is (flid, state_version). A schedule older than LastMsg does not create
// it again (flight.Input.Archived, R-ORDER-4).
type Archived struct{ Floor, LastMsg int64 }

// archivedSQL reads the Archived of the FLIDs in $1 from the archived snapshots (the sweep
// stores flight.Flight as JSON, LastMsgID included) and from the version floors a restore
// recorded (RaiseVersions): a FLID published above the restored state and absent from it
// starts above what consumers hold, as above a tombstone (R-RESTORE-1).
const archivedSQL = `SELECT flid, max(floor), max(last_msg) FROM (
		SELECT flid, max(state_version) + 1 AS floor, coalesce(max((snapshot->>'LastMsgID')::bigint), 0) AS last_msg
		FROM flight_history WHERE flid = ANY($1) GROUP BY flid
		UNION ALL
		SELECT flid, version, 0 FROM flight_version_floor WHERE flid = ANY($1)) a
	GROUP BY flid`

// ArchivedOf returns the Archived of one FLID.
func ArchivedOf(ctx context.Context, q db.Executor, flid string) (Archived, error) {
	m, err := ArchivedOfMany(ctx, q, []string{flid})
	return m[flid], err
}

// ArchivedOfMany returns the Archived of each of flids that was archived; a FLID never
// archived is absent.
func ArchivedOfMany(ctx context.Context, q db.Executor, flids []string) (map[string]Archived, error) {
	out := map[string]Archived{}
	if len(flids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, archivedSQL, flids)
	if err != nil {
		return nil, fmt.Errorf("archives of %d flights: %w", len(flids), err)
	}
	var flid string
	var a Archived
	if _, err := pgx.ForEachRow(rows, []any{&flid, &a.Floor, &a.LastMsg}, func() error { out[flid] = a; return nil }); err != nil {
		return nil, fmt.Errorf("archives of %d flights: %w", len(flids), err)
	}
	return out, nil
}

// DeleteSnapLog deletes up to limit schd_snap_log rows past the retention (R-RETAIN-3, by
// (scope_end, recv_at)): received before cutoff and covering no day on or after it, so the
// trail of a schedule that still covers a kept day stays. It returns how many it deleted.
func DeleteSnapLog(ctx context.Context, q db.Executor, cutoff time.Time, limit int) (int64, error) {
	tag, err := q.Exec(ctx, `WITH c AS MATERIALIZED (
			SELECT id FROM schd_snap_log
			WHERE recv_at < $1 AND (scope_end IS NULL OR scope_end < $2::date)
			ORDER BY recv_at LIMIT $3)
		DELETE FROM schd_snap_log s USING c WHERE s.id = c.id`, cutoff, cutoff.UTC().Format(time.DateOnly), limit)
	if err != nil {
		return 0, fmt.Errorf("delete schedule trail: %w", err)
	}
	return tag.RowsAffected(), nil
}
