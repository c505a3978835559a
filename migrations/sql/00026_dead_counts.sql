-- +goose Up
-- The DEAD rows by error class and acknowledgement, which the pump's backlog gauges count every
-- backlog interval in every instance (queue.ReadBacklog, R-PUMP-13). Through proc_state_head
-- each count fetched every DEAD row from the heap, one page each: half a second per read at a
-- week's million rows with 1 % of them DEAD, against 3 ms as an index-only scan of this one
-- (docs/performance.md, "Cost flat as the data grows"). Expand only; the predicate matches few
-- rows, so the build in the migration's transaction is short.
CREATE INDEX proc_state_dead ON proc_state (error_class, acknowledged_at) WHERE state = 'DEAD';

-- +goose Down
DROP INDEX proc_state_dead;
