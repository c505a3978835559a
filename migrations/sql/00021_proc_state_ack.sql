-- +goose Up
-- An operator's acknowledgement of a DEAD row (docs/control.md, "Acknowledging dead rows";
-- docs/runbooks.md, MsgxMessagesDead): who reviewed it, when and why. The DEAD gauge and the
-- alert count only unacknowledged rows; the row itself stays, listed, until retention deletes
-- it. A replay of a replayable row clears the three columns (R-REPLAY-2).
ALTER TABLE proc_state ADD COLUMN acknowledged_at timestamptz;
ALTER TABLE proc_state ADD COLUMN acknowledged_by text;
ALTER TABLE proc_state ADD COLUMN acknowledged_reason text;

-- +goose Down
ALTER TABLE proc_state DROP COLUMN acknowledged_reason;
ALTER TABLE proc_state DROP COLUMN acknowledged_by;
ALTER TABLE proc_state DROP COLUMN acknowledged_at;
