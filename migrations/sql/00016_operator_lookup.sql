-- +goose Up
-- What an operator asks of a message and of a flight (docs/control.md, "Message timeline" and
-- "Flight lookup").

-- The attempt history of a message: one row per counted attempt (a failure, or the attempt that
-- ended it), written by the statement that records the attempt in proc_state, so the two never
-- disagree. A first attempt that succeeds writes no row: proc_state's own times describe it
-- fully, and the pump's critical path pays nothing for the history. Bounded: the statement keeps
-- the last 10 per message (queue.AttemptHistory); the rows go with their proc_state row.
CREATE TABLE proc_attempt (
    msg_id       bigint      NOT NULL REFERENCES proc_state (msg_id) ON DELETE CASCADE,
    -- 1, 2, … per message, across replays (proc_state.attempts restarts at 0 on a replay).
    attempt_no   integer     NOT NULL CHECK (attempt_no > 0),
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz NOT NULL,
    outcome      text        NOT NULL CHECK (outcome IN ('FAILED', 'SUCCEEDED', 'SKIPPED', 'DEAD')),
    error_class  text,
    error        text,
    PRIMARY KEY (msg_id, attempt_no)
);

-- The flight a message is about (the FLID of a FLOP), bound with its identity by the pump. A
-- schedule names many flights: its flights are found through the events it wrote (below).
ALTER TABLE proc_state ADD COLUMN flid text;
CREATE INDEX proc_state_flid ON proc_state (flid, msg_id) WHERE flid IS NOT NULL;
-- ListMessages' time window (enqueued_at is our own clock, always set; the inbox's
-- received_at may be missing or skewed). msg_id is in the index so the window's ID bounds are
-- an index-only scan.
CREATE INDEX proc_state_enqueued ON proc_state (enqueued_at, msg_id);
-- A flight's events in every state (GetFlight, ListMessages by FLID); msg_event_flid covers only
-- the unsent ones the dispatcher reads.
CREATE INDEX msg_event_key ON msg_event (partition_key, event_id);

-- +goose Down
DROP INDEX msg_event_key;
DROP INDEX proc_state_enqueued;
DROP INDEX proc_state_flid;
ALTER TABLE proc_state DROP COLUMN flid;
DROP TABLE proc_attempt;
