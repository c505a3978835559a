-- +goose Up
-- Indexes the EXPLAIN tests on production-sized tables asked for (docs/performance.md, "Cost
-- flat as the data grows"). Expand only; built in the migration's transaction, which at the
-- sizes of an upgrade (these predicates match few rows) takes well under a second.
--
-- The backfill health gauge counts the abandoned backfills: without an index each scrape read
-- the whole of proc_state, 1 M rows at the retention limit.
CREATE INDEX proc_state_abandoned ON proc_state (backfill_abandon_reason)
    WHERE backfill_abandoned_at IS NOT NULL;
-- The history sweep reads flights in (operation_day NULLS FIRST, flid) order and stops at its
-- batch; in that order it reads the index instead of sorting the whole live table.
CREATE INDEX flight_schd_history ON flight_schd (operation_day NULLS FIRST, flid);

-- +goose Down
DROP INDEX flight_schd_history;
DROP INDEX proc_state_abandoned;
