-- +goose Up
-- The events that hold back the later events of their key (docs/dispatcher.md): DEAD ones and
-- those waiting for a retry. The dispatcher's read of the next events checks, for each
-- candidate, that no such event precedes it; through the index of every unsent event that check
-- read the whole backlog of its topic once per candidate whenever the planner's statistics
-- still counted no unsent event (a burst of tens of thousands after a schedule snapshot or a
-- broker outage, before autovacuum analyses the table): seconds per read on a large msg_event
-- (docs/performance.md, "Cost flat as the data grows"). The blockers are few in every state of
-- the system, so a check through their own index is a page read whatever the statistics say.
-- Expand only; the predicate matches few rows, so the build in the migration's transaction is
-- short.
CREATE INDEX msg_event_blockers ON msg_event (target, partition_key, event_id)
    WHERE state <> 'SENT' AND (state = 'DEAD' OR next_attempt_at IS NOT NULL);

-- +goose Down
DROP INDEX msg_event_blockers;
