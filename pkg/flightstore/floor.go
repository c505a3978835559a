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

// RaiseVersions records floors, per FLID the highest STATE_VERSION already published, and
// raises every stored flight below its floor to it, in the caller's transaction (R-RESTORE-1).
// The next change of a raised flight is then published above everything consumers hold, and
// a FLID the restored state lacks starts above its floor (ArchivedOfMany). A floor only rises;
// its recorded_at is renewed by every run, so FloorRecordedAt says when Kafka was last read.
func RaiseVersions(ctx context.Context, q db.Executor, floors map[string]int64, now time.Time) (Raised, error) {
	var r Raised
	if len(floors) == 0 {
		return r, nil
	}
	flids := slices.Sorted(maps.Keys(floors))
	versions := make([]int64, len(flids))
	for i, f := range flids {
		versions[i] = floors[f]
	}
	tag, err := q.Exec(ctx, `INSERT INTO flight_version_floor (flid, version, recorded_at)
		SELECT * FROM unnest($1::text[], $2::bigint[]) AS f(flid, version), (SELECT $3::timestamptz) AS t
		ON CONFLICT (flid) DO UPDATE SET version = greatest(flight_version_floor.version, excluded.version),
			recorded_at = excluded.recorded_at`, flids, versions, now)
	if err != nil {
		return r, fmt.Errorf("record the version floors of %d FLIDs: %w", len(flids), err)
	}
	r.Floors = tag.RowsAffected()
	tag, err = q.Exec(ctx, `UPDATE flight_schd f SET state_version = v.version
		FROM flight_version_floor v WHERE v.flid = f.flid AND f.state_version < v.version`)
	if err != nil {
		return r, fmt.Errorf("raise the stored flights to their version floors: %w", err)
	}
	r.Flights = tag.RowsAffected()
	return r, nil
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
