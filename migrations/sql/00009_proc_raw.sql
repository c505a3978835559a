-- +goose Up
-- The raw text of a message as the pump read it, compressed (zstd), kept exactly as long as its
-- proc_state row: the database team may purge a marked inbox row long before our retention ends,
-- and a replay or GetMessage must still have the message (docs/pump.md, "Raw text").
CREATE TABLE proc_raw (
    msg_id    bigint      PRIMARY KEY REFERENCES proc_state (msg_id) ON DELETE CASCADE,
    raw_zstd  bytea       NOT NULL,
    raw_bytes integer     NOT NULL CHECK (raw_bytes >= 0),
    stored_at timestamptz NOT NULL
);
-- Already compressed: TOAST would only spend CPU trying again.
ALTER TABLE proc_raw ALTER COLUMN raw_zstd SET STORAGE EXTERNAL;

-- +goose Down
DROP TABLE proc_raw;
