-- +goose Up
-- Upstream contract violations (docs/ingest.md, "Contract violations"). Discovery relies on
-- inbox IDs that only grow and on a processed marker that only msgexchange writes, on rows it
-- has enqueued (R-INGEST-1). When ingest sees either promise broken it stops advancing
-- W and records what it saw here, in the same transaction as that round's decision, so the stop
-- survives restarts and fail-overs until an operator resolves it through control
-- (ResolveContractViolation), which clears these columns.
--
-- violation_kind: 'inbox-behind-watermark' (the inbox's largest ID is below W: a reset
-- AUTO_INCREMENT, a truncated or restored inbox) or 'marked-above-watermark' (a row above W
-- carries a marker written after marker_since: PostgreSQL was restored from an older backup).
--
-- marker_since: since when the processed markers of the inbox are msgexchange's own. Set by
-- ingest at its first round outside shadow mode (markers written before, by the system it
-- replaces, are expected on the stock a cutover re-reads); moved to now by an operator who
-- resolves marked-above-watermark by having the marked rows processed again.
ALTER TABLE inbox_cursor
    ADD COLUMN violation_kind   text
        CHECK (violation_kind IN ('inbox-behind-watermark', 'marked-above-watermark')),
    ADD COLUMN violation_since  timestamptz,
    ADD COLUMN violation_detail text,
    ADD COLUMN marker_since     timestamptz,
    ADD CONSTRAINT inbox_cursor_violation CHECK (
        (violation_kind IS NULL) = (violation_since IS NULL)
        AND (violation_kind IS NULL) = (violation_detail IS NULL));

-- +goose Down
ALTER TABLE inbox_cursor
    DROP CONSTRAINT inbox_cursor_violation,
    DROP COLUMN violation_kind,
    DROP COLUMN violation_since,
    DROP COLUMN violation_detail,
    DROP COLUMN marker_since;
