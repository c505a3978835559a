-- +goose Up
-- A clock per hole (R-INGEST-4 to R-INGEST-6, D-15; docs/ingest.md, "Holes").
--
-- inbox_open_hole: the missing IDs above W that ingest has seen with a larger ID committed
-- beyond them, as ranges, each with the first round that saw it (seen_at). A range waits
-- pipeline.max-commit-delay from its own seen_at, so holes seen in the same round are released
-- together. Written only by ingest, in the transaction that writes W; a row at or below W is
-- stale and removed by the next round. A partly filled range is split, and the parts keep the
-- range's seen_at. Cleared by a cutover seed, which replaces the unseeded start's holes.
CREATE TABLE inbox_open_hole (
    first_id  bigint      PRIMARY KEY,
    last_id   bigint      NOT NULL CHECK (last_id >= first_id),
    seen_at   timestamptz NOT NULL
);

-- scanned_to: every ID in (w, scanned_to] has been looked at, and each missing one is in
-- inbox_open_hole; the scan window beyond the round's batch is bounded (docs/ingest.md).
-- waiting_rows: the rows visible in (w, scanned_to] that are not enqueued yet; waiting_since:
-- when the oldest of them was first seen. max_commit_delay_ms: ingest's setting, so that
-- control can say when each hole is due. hole_fill_max_seconds / hole_fill_max_at: the longest
-- measured commit delay (a hole that filled while W waited for it) and when it was measured.
ALTER TABLE inbox_cursor
    ADD COLUMN scanned_to            bigint NOT NULL DEFAULT 0,
    ADD COLUMN waiting_rows          bigint NOT NULL DEFAULT 0,
    ADD COLUMN waiting_since         timestamptz,
    ADD COLUMN max_commit_delay_ms   bigint,
    ADD COLUMN hole_fill_max_seconds double precision,
    ADD COLUMN hole_fill_max_at      timestamptz;

-- The measured commit delays (msgx_ingest_hole_fill_seconds, kept across restarts for
-- GetStatus): how many holes filled within each bucket's upper bound (le_seconds, 'Infinity'
-- for the last); per bucket, not cumulative.
CREATE TABLE inbox_hole_fill (
    le_seconds double precision PRIMARY KEY,
    fills      bigint           NOT NULL
);

-- +goose Down
DROP TABLE inbox_hole_fill;
ALTER TABLE inbox_cursor
    DROP COLUMN scanned_to,
    DROP COLUMN waiting_rows,
    DROP COLUMN waiting_since,
    DROP COLUMN max_commit_delay_ms,
    DROP COLUMN hole_fill_max_seconds,
    DROP COLUMN hole_fill_max_at;
DROP TABLE inbox_open_hole;
