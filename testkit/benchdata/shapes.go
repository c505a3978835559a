package benchdata

// statements generate each table with INSERT … SELECT generate_series, in dependency order.
// Times count back from now() across the retention window, so the oldest rows are exactly what
// the retention sweeps delete next. :messages, :flights, :events, :requests and :snaplogs are
// the scale's row counts. Message g concerns flight ((g-1) % :flights)+1; flights
// 1 … :flights/2 are live, on five operation days around today but never today, and the others
// are in flight_history.
// proc_raw holds one real zstd frame of a typical message, so the raw-text reads decode it.
var statements = []struct{ table, sql string }{
	{"proc_state", `INSERT INTO proc_state (msg_id, state, attempts, identity_key, msg_type, msg_styp, received_at,
		enqueued_at, processing_started_at, finished_at, backfill_at, updated_at, applied_at, flid, error_class, last_error)
		SELECT g, st, 1, 'DFOE:' || g, 'DFOE', CASE WHEN g % 10 = 0 THEN 'SCHD' ELSE 'FUPD' END, t, t, t, t + interval '20 ms',
		       CASE WHEN g < :messages - 150 THEN t + interval '5 min' END, t + interval '5 min', t + interval '20 ms',
		       'F' || ((g - 1) % :flights + 1),
		       CASE st WHEN 'DEAD' THEN 'MALFORMED' END, CASE st WHEN 'DEAD' THEN 'element FLID missing' END
		FROM generate_series(1, :messages) g,
		     LATERAL (SELECT now() - interval '7 days' * (1 - g::float8 / :messages) AS t,
		                     CASE WHEN g % 100 = 0 THEN 'DEAD' WHEN g % 25 = 0 THEN 'SKIPPED' ELSE 'SUCCEEDED' END AS st) x`},
	{"proc_raw", `INSERT INTO proc_raw (msg_id, raw_zstd, raw_bytes, stored_at)
		SELECT msg_id, $1::bytea, $2::integer, enqueued_at FROM proc_state`},
	{"proc_attempt", `INSERT INTO proc_attempt (msg_id, attempt_no, started_at, ended_at, outcome, error_class, error)
		SELECT msg_id, 1, processing_started_at, finished_at, state, error_class, last_error FROM proc_state`},
	{"flight_schd", `INSERT INTO flight_schd (flid, state, state_version, operation_day, last_msg_id, created_at, updated_at,
		deleted_at, collections_present, ffid, alcd, flno, mvin, sodt, acft, reno, trml, stnd, estt, maid)
		SELECT 'F' || g, CASE WHEN g % 50 = 0 THEN 'DELETED' ELSE 'ACTIVE' END, 7, d, g, now() - interval '3 days', now(),
		       CASE WHEN g % 50 = 0 THEN now() - interval '1 hour' END, '{GTDT,CKDT,ROUT}',
		       'FF' || g, 'LH', lpad((g % 9000)::text, 4, '0'), CASE WHEN g % 2 = 0 THEN 'A' ELSE 'D' END,
		       to_char(d, 'YYYYMMDD') || '1200', 'A320', 'D-A' || (g % 900), 'T1', 'S' || (g % 120),
		       to_char(d, 'YYYYMMDD') || '1210', CASE WHEN g % 7 = 0 THEN 'F' || (g - 1) END
		FROM generate_series(1, :flights / 2) g,
		     -- Five operation days around today, today left out: the benches write today's
		     -- schedule themselves, and a snapshot of today would delete the generated flights of
		     -- the day (a fifth of them) in its set-up.
		     LATERAL (SELECT current_date + (ARRAY[-2, -1, 1, 2, 3])[g % 5 + 1] AS d) x`},
	{"flight_gtdt", `INSERT INTO flight_gtdt (flid, ordinal, gtno, gate, gtyp)
		SELECT flid, o, o::text, 'A' || (o * 7 % 40), 'P' FROM flight_schd, generate_series(1, 2) o`},
	{"flight_ckdt", `INSERT INTO flight_ckdt (flid, ordinal, ckno, chkc, ccls)
		SELECT flid, o, o::text, 'C' || o, 'Y' FROM flight_schd, generate_series(1, 3) o WHERE mvin = 'D'`},
	{"flight_cldt", `INSERT INTO flight_cldt (flid, ordinal, clno, belt, bcls)
		SELECT flid, 1, '1', 'B' || (length(flid) % 9), 'Y' FROM flight_schd WHERE mvin = 'A'`},
	{"flight_chdt", `INSERT INTO flight_chdt (flid, ordinal, chno, chut)
		SELECT flid, 1, '1', 'X' FROM flight_schd WHERE mvin = 'D'`},
	{"flight_psdt", `INSERT INTO flight_psdt (flid, ordinal, psno, psst)
		SELECT flid, 1, '1', 'S' FROM flight_schd WHERE mvin = 'A'`},
	{"flight_route_point", `INSERT INTO flight_route_point (flid, route_kind, ordinal, rtno, apcd)
		SELECT flid, 'ROUT', o, o::text, 'AP' || o FROM flight_schd, generate_series(1, 2) o`},
	{"flight_history", `INSERT INTO flight_history (flid, state_version, state, operation_day, snapshot, archived_at)
		SELECT 'F' || g, 9, 'DELETED', current_date - 4 - (g % 3),
		       jsonb_build_object('flid', 'F' || g, 'alcd', 'LH', 'flno', lpad((g % 9000)::text, 4, '0'), 'acft', 'A320'),
		       now() - interval '1 day' * (g % 3)
		FROM generate_series(:flights / 2 + 1, :flights) g`},
	{"flight_version_floor", `INSERT INTO flight_version_floor (flid, version, recorded_at)
		SELECT flid, state_version, archived_at FROM flight_history`},
	{"flight_change", `INSERT INTO flight_change (msg_id, flid, msg_type, styp, cause, state, version, changes, written_at)
		SELECT msg_id, flid, msg_type, msg_styp, 'message', 'ACTIVE', msg_id, '{"ESTT": {"old": "202612031200", "new": "202612031210"}}',
		       finished_at
		FROM proc_state WHERE state = 'SUCCEEDED'`},
	// Two thirds of the events go to the message topic (one per applied message, then as many
	// again for the flights' updates); the schedule topic holds one row per live flight.
	{"msg_event", `INSERT INTO msg_event (target, partition_key, event_type, state_version, payload, msg_id, state,
		attempts, created_at, updated_at, sent_at)
		SELECT 'KAFKA:msg', 'F' || ((g - 1) % :flights + 1), 'UPSERT', g, '{"flid": "x", "estt": "202612031210"}',
		       (g - 1) % :messages + 1, 'SENT', 1, t, t, t
		FROM generate_series(1, :events - :flights / 2) g,
		     LATERAL (SELECT now() - interval '7 days' * (1 - g::float8 / (:events - :flights / 2)) AS t) x`},
	{"msg_event schedule", `INSERT INTO msg_event (target, partition_key, event_type, state_version, payload, msg_id, state,
		attempts, created_at, updated_at, sent_at)
		SELECT 'KAFKA:schd', flid, 'UPSERT', state_version, '{"flid": "x"}', last_msg_id, 'SENT', 1, updated_at, updated_at, updated_at
		FROM flight_schd`},
	{"req_track", `INSERT INTO req_track (req_type, req_styp, covered_day, sndr, state, seqn, coutmsgs_id, answer_msg_id,
		created_at, sent_at, done_at, updated_at, scope, from_day, to_day)
		SELECT 'RQFD', 'SCHD', d, 'MSGX', 'DONE', g, g, g, t, t, t + interval '2 s', t + interval '2 s',
		       'rqfd:' || g, d, d
		FROM generate_series(1, :requests) g,
		     LATERAL (SELECT now() - interval '30 days' * (1 - g::float8 / :requests) AS t) x,
		     LATERAL (SELECT (t + interval '1 day')::date AS d) y`},
	{"schd_snap_log", `INSERT INTO schd_snap_log (msg_id, styp, recs, applied, deleted, scope_start, scope_end, outcome, recv_at,
		unchanged, batches)
		SELECT g, 'SCHD', 2000, 30, 1, (t)::date, (t + interval '2 days')::date, 'APPLIED', t, 1969, 4
		FROM generate_series(1, :snaplogs) g,
		     LATERAL (SELECT now() - interval '90 days' * (1 - g::float8 / :snaplogs) AS t) x`},
	{"inbox_hole", `INSERT INTO inbox_hole (first_id, last_id, released_at)
		SELECT g * 1000, g * 1000 + 1, now() - interval '1 hour' * g FROM generate_series(1, 200) g`},
	{"inbox_late", `INSERT INTO inbox_late (msg_id, hole_first, detected_at, enqueued_at)
		SELECT g * 1000 + 1, g * 1000, now() - interval '1 hour' * g, now() - interval '1 hour' * g FROM generate_series(1, 20) g`},
}
