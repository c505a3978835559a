-- +goose Up
-- The control service lists a message's outbox events (GetMessage); without this index that
-- read scans the whole outbox, which holds a week of events (pipeline.event-retention).
CREATE INDEX msg_event_msg_id ON msg_event (msg_id) WHERE msg_id IS NOT NULL;

-- +goose Down
DROP INDEX msg_event_msg_id;
