-- +goose Up
-- The schedule trail of R-SCHD-7 and R-TX-7: one row per run of a SCHD DNLD/RESP,
-- appended outside the business transactions. 00002 gave it the declared count, the applied and
-- deleted counts and the scope's bounds; a snapshot also says how many flights it found already
-- at their state (a re-run after a crash between batches finds most of them so), in how many
-- batches it wrote, which days exactly it replaced (a DNLD's days need not be contiguous) and,
-- for a refused package, why.
ALTER TABLE schd_snap_log
    ADD COLUMN unchanged  integer,
    ADD COLUMN batches    integer,
    ADD COLUMN scope_days date[],
    ADD COLUMN reason     text;
CREATE INDEX schd_snap_log_msg_id ON schd_snap_log (msg_id);

-- +goose Down
DROP INDEX schd_snap_log_msg_id;
ALTER TABLE schd_snap_log
    DROP COLUMN reason,
    DROP COLUMN scope_days,
    DROP COLUMN batches,
    DROP COLUMN unchanged;
