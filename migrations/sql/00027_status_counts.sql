-- +goose Up
-- The status RPC's count by error class (queue.Stats), which an operator's
-- `msgxctl get-status --watch` asks every few seconds. Without an index each call read the whole
-- of proc_state, a parallel sequential scan of a week's million rows. The rows that carry a class
-- are the FAILED and DEAD ones and the SKIPPED ones of an unsupported kind, never the bulk of
-- SUCCEEDED rows, so this makes the count a scan of their entries only (docs/performance.md,
-- "Cost flat as the data grows"). Expand only; the predicate matches a small part of the table,
-- so the build in the migration's transaction is short.
CREATE INDEX proc_state_error_class ON proc_state (error_class) WHERE error_class IS NOT NULL;

-- +goose Down
DROP INDEX proc_state_error_class;
