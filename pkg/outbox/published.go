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

// Caught is what CatchUp changed after a restore.
type Caught struct {
	// Msg and Schd count the unsent events marked SENT because Kafka already held them.
	Msg, Schd int64
	// Sequence is the next event ID the outbox hands out.
	Sequence int64
}

// CatchUp tells the restored outbox what the lost timeline already published, in the caller's
// transaction (R-RESTORE-1): a KAFKA:msg event still unsent whose (ID, FLID, version) is on
// the topic (msg), and a KAFKA:schd row still unsent at or below its FLID's version on the
// topic (schd), are SENT: sending them again would put a version below one consumers hold
// after it. The event sequence moves past maxID, the largest event ID on either topic, so a
// new event never reuses an ID consumers deduplicate by.
func CatchUp(ctx context.Context, q db.Executor, msg map[int64]Published, schd map[string]int64, maxID int64, now time.Time) (Caught, error) {
	var c Caught
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
		return c, fmt.Errorf("mark the KAFKA:msg events already published: %w", err)
	}
	c.Msg = tag.RowsAffected()
	sf := slices.Sorted(maps.Keys(schd))
	sv := make([]int64, len(sf))
	for i, f := range sf {
		sv[i] = schd[f]
	}
	tag, err = q.Exec(ctx, `UPDATE msg_event e SET state = 'SENT', sent_at = $3, updated_at = $3, last_error = NULL,
			next_attempt_at = NULL
		FROM unnest($1::text[], $2::bigint[]) AS p(flid, version)
		WHERE e.target = 'KAFKA:schd' AND e.partition_key = p.flid AND e.state_version <= p.version
			AND e.state <> 'SENT'`, sf, sv, now)
	if err != nil {
		return c, fmt.Errorf("mark the KAFKA:schd rows already published: %w", err)
	}
	c.Schd = tag.RowsAffected()
	// setval's is_called makes the next nextval return the value plus one; a sequence already
	// past maxID is left where it is.
	err = q.QueryRow(ctx, `SELECT CASE WHEN s.last_value < $1 OR NOT s.is_called THEN setval('msg_event_id_seq', greatest($1, s.last_value), true) ELSE s.last_value END + 1
		FROM msg_event_id_seq s`, maxID).Scan(&c.Sequence)
	if err != nil {
		return c, fmt.Errorf("move the event sequence past %d: %w", maxID, err)
	}
	return c, nil
}
