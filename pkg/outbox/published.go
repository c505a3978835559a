package outbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// Published is one record Kafka already holds, as its headers and key name it.
type Published struct {
	FLID    string
	Version int64
}

// Caught is what the catch-up after a restore changed (CatchUpMsg, CatchUpSchd,
// MoveSequencePast).
type Caught struct {
	// Msg and Schd count the unsent events marked SENT because Kafka already held them.
	Msg, Schd int64
	// Sequence is the next event ID the outbox hands out.
	Sequence int64
}

// CatchUpMsg, CatchUpSchd and MoveSequencePast tell the restored outbox what the lost timeline
// already published, each in the caller's transaction (R-RESTORE-1): a KAFKA:msg event still
// unsent whose (ID, FLID, version) is on the topic, and a KAFKA:schd row still unsent at or
// below its FLID's version on the topic, are SENT: sending them again would put a version
// below one consumers hold after it. The event sequence moves past the largest event ID on
// either topic, so a new event never reuses an ID consumers deduplicate by.

// CatchUpMsg marks SENT the unsent KAFKA:msg events of msg (a batch of the records read: one
// statement takes them all) and returns how many.
func CatchUpMsg(ctx context.Context, q db.Executor, msg map[int64]Published, now time.Time) (int64, error) {
	ids := slices.Sorted(maps.Keys(msg))
	flids, versions := make([]string, len(ids)), make([]int64, len(ids))
	for i, id := range ids {
		flids[i], versions[i] = msg[id].FLID, msg[id].Version
	}
	tag, err := q.Exec(ctx, `UPDATE msg_event e SET state = 'SENT', sent_at = $4, updated_at = $4, last_error = NULL,
			next_attempt_at = NULL
		FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS p(id, flid, version)
		WHERE e.target = 'KAFKA:msg' AND e.event_id = p.id AND e.partition_key = p.flid
			AND e.state_version = p.version AND e.state <> 'SENT'`, ids, flids, versions, now)
	if err != nil {
		return 0, fmt.Errorf("mark %d KAFKA:msg events already published: %w", len(ids), err)
	}
	return tag.RowsAffected(), nil
}

// CatchUpSchd marks SENT the unsent KAFKA:schd rows at or below their FLID's version in schd,
// at most batch FLIDs per statement, and returns how many.
func CatchUpSchd(ctx context.Context, q db.Executor, schd map[string]int64, batch int, now time.Time) (int64, error) {
	var n int64
	for chunk := range slices.Chunk(slices.Sorted(maps.Keys(schd)), max(batch, 1)) {
		versions := make([]int64, len(chunk))
		for i, f := range chunk {
			versions[i] = schd[f]
		}
		tag, err := q.Exec(ctx, `UPDATE msg_event e SET state = 'SENT', sent_at = $3, updated_at = $3, last_error = NULL,
				next_attempt_at = NULL
			FROM unnest($1::text[], $2::bigint[]) AS p(flid, version)
			WHERE e.target = 'KAFKA:schd' AND e.partition_key = p.flid AND e.state_version <= p.version
				AND e.state <> 'SENT'`, chunk, versions, now)
		if err != nil {
			return n, fmt.Errorf("mark the KAFKA:schd rows already published of %d FLIDs from %s: %w", len(chunk), chunk[0], err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}

// MoveSequencePast moves the event sequence past maxID, the largest event ID on either topic,
// and returns the next event ID the outbox hands out.
func MoveSequencePast(ctx context.Context, q db.Executor, maxID int64) (int64, error) {
	var next int64
	// setval's is_called makes the next nextval return the value plus one; a sequence already
	// past maxID is left where it is.
	err := q.QueryRow(ctx, `SELECT CASE WHEN s.last_value < $1 OR NOT s.is_called THEN setval('msg_event_id_seq', greatest($1, s.last_value), true) ELSE s.last_value END + 1
		FROM msg_event_id_seq s`, maxID).Scan(&next)
	if err != nil {
		return 0, fmt.Errorf("move the event sequence past %d: %w", maxID, err)
	}
	return next, nil
}
