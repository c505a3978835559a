-- +goose Up
-- When a KAFKA:schd row last became PENDING. The pump's upsert gives a row a new event_id on
-- every accepted state but keeps this while the row is still PENDING, so the flush reads rows
-- oldest-waiting first and a FLID updated more often than it is flushed cannot starve.
ALTER TABLE msg_event ADD COLUMN pending_since timestamptz;
UPDATE msg_event SET pending_since = updated_at WHERE target = 'KAFKA:schd' AND state = 'PENDING';
CREATE INDEX msg_event_schd_pending ON msg_event (pending_since, event_id)
    WHERE target = 'KAFKA:schd' AND state = 'PENDING';

-- +goose Down
DROP INDEX msg_event_schd_pending;
ALTER TABLE msg_event DROP COLUMN pending_since;
