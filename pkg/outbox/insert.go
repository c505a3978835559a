package outbox

import (
	"fmt"
	"time"
)

// insertEvents is the statement AddTo and Add send for events: one statement for all of them
// and the dispatcher's notification, whatever their number. A schedule snapshot's hundreds of
// events would otherwise be hundreds of statements (R-SCHD-4), and a FLOP's two with the notify
// are one statement instead of three, at the same server CPU (docs/performance.md, "Domain
// cost"): one way to write events for every caller. It leaves the rows one upsert per event in
// turn would leave, with one difference of no consequence: the event_ids of
// KAFKA:schd states that a later state of the same FLID replaces among events are never used.
//
// The event IDs are taken from the sequence in one go, sorted, and given to the events in the
// order of events, so they follow the events' order exactly as one nextval per event would:
// the dispatcher reads KAFKA:msg by event_id, and a FLID's order on Kafka rests on it
// (R-OUTBOX-2). Nothing here depends on the order in which PostgreSQL evaluates the rows of an
// INSERT … SELECT or the data-modifying parts of one statement.
//
// One INSERT cannot change a KAFKA:schd row twice (its upsert keeps one row per FLID), so the
// KAFKA:schd events of one FLID are folded first into the one the upserts in turn would leave:
// the last of those with the highest version (R-OUTBOX-4: a state replaces the row when its
// version is not older, so an earlier state of the batch is always replaced by it or rejected
// before it).
func insertEvents(events []NewEvent, now time.Time) (string, []any, error) {
	kept, err := foldSchd(events)
	if err != nil {
		return "", nil, err
	}
	n := len(kept)
	targets, flids, types := make([]string, n), make([]string, n), make([]string, n)
	traceParents, traceStates := make([]*string, n), make([]*string, n)
	versions, msgIDs := make([]int64, n), make([]int64, n)
	payloads := make([]*string, n)
	for i, e := range kept {
		targets[i], flids[i], types[i], versions[i], msgIDs[i] = e.Target, e.PartitionKey, e.Type, e.Version, e.MsgID
		traceParents[i], traceStates[i] = e.Trace.Columns()
		if e.Payload != nil {
			p := string(e.Payload)
			payloads[i] = &p
		}
	}
	return insertEventsSQL, []any{n, targets, flids, types, versions, payloads, msgIDs, traceParents, traceStates, now, Channel}, nil
}

// foldSchd returns events without the KAFKA:schd states that a later-or-equal version of the
// same FLID in events replaces, in their order; an unknown target is refused as AddTo refuses
// it.
func foldSchd(events []NewEvent) ([]NewEvent, error) {
	winner := map[string]int{}
	for i, e := range events {
		switch e.Target {
		case TargetMsg:
		case TargetSchd:
			if w, ok := winner[e.PartitionKey]; !ok || events[w].Version <= e.Version {
				winner[e.PartitionKey] = i
			}
		default:
			return nil, fmt.Errorf("outbox: unknown target %q", e.Target)
		}
	}
	out := make([]NewEvent, 0, len(events))
	for i, e := range events {
		if e.Target == TargetSchd && winner[e.PartitionKey] != i {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// insertEventsSQL is insertEvents' statement: $1 the number of events left after foldSchd, $2…$9
// their columns in event order, $10 the time, $11 the channel to notify. ids holds $1 values of the sequence in
// ascending order, and the n-th event takes the n-th; the two inserts write rows of different
// targets, so neither can see or change what the other writes. A data-modifying WITH part runs
// once and to completion whether or not the query reads it, so the SELECT that notifies is
// the whole query. The KAFKA:schd part is the one-row upsert of R-OUTBOX-4 with the reserved ID
// in place of a nextval at update time. Its pending_since is kept while the row is still
// PENDING: the flush reads the longest waiting rows first, so a FLID updated faster than it is
// flushed cannot starve.
const insertEventsSQL = `WITH ids AS (
		SELECT array_agg(id ORDER BY id) AS a FROM (SELECT nextval('msg_event_id_seq') AS id FROM generate_series(1, $1::int)) s),
	ev AS MATERIALIZED (
		SELECT ids.a[u.ord] AS event_id, u.target, u.flid, u.typ, u.version, u.payload::jsonb AS payload, u.msg_id,
			u.tp, u.ts
		FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::bigint[], $8::text[], $9::text[])
			WITH ORDINALITY AS u(target, flid, typ, version, payload, msg_id, tp, ts, ord), ids),
	msg AS (
		INSERT INTO msg_event (event_id, target, partition_key, event_type, state_version, payload, msg_id,
			trace_parent, trace_state, created_at, updated_at)
		SELECT event_id, target, flid, typ, version, payload, msg_id, tp, ts, $10, $10 FROM ev WHERE target = 'KAFKA:msg'),
	schd AS (
		INSERT INTO msg_event (event_id, target, partition_key, event_type, state_version, payload, msg_id,
			trace_parent, trace_state, created_at, updated_at, pending_since)
		SELECT event_id, target, flid, typ, version, payload, msg_id, tp, ts, $10, $10, $10 FROM ev WHERE target = 'KAFKA:schd'
		ON CONFLICT (partition_key) WHERE target = 'KAFKA:schd' DO UPDATE SET
			event_id = excluded.event_id, event_type = excluded.event_type,
			pending_since = CASE WHEN msg_event.state = 'PENDING' THEN coalesce(msg_event.pending_since, excluded.pending_since)
				ELSE excluded.pending_since END,
			state_version = excluded.state_version, payload = excluded.payload, msg_id = excluded.msg_id,
			trace_parent = excluded.trace_parent, trace_state = excluded.trace_state,
			state = 'PENDING', attempts = 0, next_attempt_at = NULL, last_error = NULL, sent_at = NULL,
			updated_at = excluded.updated_at
		WHERE msg_event.state_version <= excluded.state_version)
	SELECT pg_notify($11, '')`
