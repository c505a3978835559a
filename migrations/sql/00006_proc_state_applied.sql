-- +goose Up
-- When step ① of a message (its flight changes and outbox events) committed. Written by the pump
-- inside that transaction and kept by replay: a message run again after ① committed (a crash or
-- a projection failure before ③, or an operator's replay of DEAD(EXHAUSTED)) must not apply
-- its change a second time over newer state; it only re-projects the current state and
-- finishes (docs/pump.md).
ALTER TABLE proc_state ADD COLUMN applied_at timestamptz;

-- +goose Down
ALTER TABLE proc_state DROP COLUMN applied_at;
