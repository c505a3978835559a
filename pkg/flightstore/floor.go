package flightstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Raised is what RaiseVersions changed: the floors it recorded (every FLID read, its time
// renewed, its version only ever rising) and the stored flights it raised to their floor.
type Raised struct{ Floors, Flights int64 }

// DefaultFloorBatch is how many FLIDs one statement of RaiseVersions writes when the caller
// gives no batch.
const DefaultFloorBatch = 5000

// RaiseVersions records floors, per FLID the highest STATE_VERSION already published, and
// raises every stored flight below its floor to it, in the caller's transaction (R-RESTORE-1).
// The next change of a raised flight is then published above everything consumers hold, and
// a FLID absent from the restored state starts above it (ArchivedOfMany). A floor only rises;
// its recorded_at is renewed by every run, so FloorRecordedAt says when Kafka was last read.
// Each statement takes at most batch FLIDs (0: DefaultFloorBatch), so none grows with the
// number of flights the topics named: the floors go in in FLID order, and the flights are
// raised a range of floors at a time, every floor ever recorded included.
func RaiseVersions(ctx context.Context, q db.Executor, floors map[string]int64, batch int, now time.Time) (Raised, error) {
	var r Raised
	if len(floors) == 0 {
		return r, nil
	}
	if batch <= 0 {
		batch = DefaultFloorBatch
	}
	flids := slices.Sorted(maps.Keys(floors))
	for chunk := range slices.Chunk(flids, batch) {
		versions := make([]int64, len(chunk))
		for i, f := range chunk {
			versions[i] = floors[f]
		}
		tag, err := q.Exec(ctx, `INSERT INTO flight_version_floor (flid, version, recorded_at)
			SELECT * FROM unnest($1::text[], $2::bigint[]) AS f(flid, version), (SELECT $3::timestamptz) AS t
			ON CONFLICT (flid) DO UPDATE SET version = greatest(flight_version_floor.version, excluded.version),
				recorded_at = excluded.recorded_at`, chunk, versions, now)
		if err != nil {
			return r, fmt.Errorf("record the version floors of %d FLIDs from %s: %w", len(chunk), chunk[0], err)
		}
		r.Floors += tag.RowsAffected()
	}
	// Every floor, not only this run's: a restore to an older backup may have taken a flight
	// below a floor an earlier run recorded.
	for after := ""; ; {
		var last *string
		if err := q.QueryRow(ctx, `SELECT max(flid) FROM (SELECT flid FROM flight_version_floor WHERE flid > $1
			ORDER BY flid LIMIT $2) AS c`, after, batch).Scan(&last); err != nil {
			return r, fmt.Errorf("read the version floors after %q: %w", after, err)
		}
		if last == nil {
			return r, nil
		}
		tag, err := q.Exec(ctx, `UPDATE flight_schd f SET state_version = v.version
			FROM flight_version_floor v WHERE v.flid = f.flid AND v.flid > $1 AND v.flid <= $2 AND f.state_version < v.version`,
			after, *last)
		if err != nil {
			return r, fmt.Errorf("raise the stored flights to their version floors (%q to %q): %w", after, *last, err)
		}
		r.Flights += tag.RowsAffected()
		after = *last
	}
}

// FloorRecordedAt returns when a version floor was last recorded (RaiseVersions), nil when
// none ever was: control's resume after a restore asks whether it happened after the restored
// timeline's markers (R-RESTORE-3).
func FloorRecordedAt(ctx context.Context, q db.Executor) (*time.Time, error) {
	var at *time.Time
	if err := q.QueryRow(ctx, `SELECT max(recorded_at) FROM flight_version_floor`).Scan(&at); err != nil {
		return nil, fmt.Errorf("read the version floor's time: %w", err)
	}
	return at, nil
}
