-- +goose Up
-- Order-safe flight state (docs/rules.md, the R-ORDER rules; docs/flight-domain.md,
-- "Order-safe application").

-- Which message last wrote each part of a flight, every message's word on its existence and
-- the masters it named (flight.Provenance as JSON), written by the row's own upsert. NULL on a
-- row stored before this column existed, or inserted by a release that does not know it: the
-- pump reads such a row conservatively, every part as written by its last_msg_id, so every
-- older message is superseded. Nullable without a default: adding it rewrites no row and
-- takes its lock only for an instant, and the previous release's upsert, which does not name
-- the column, keeps working.
ALTER TABLE flight_schd ADD COLUMN provenance jsonb;

-- A flight's change history (GetFlightHistory, GetMessage): one row per message and flight it
-- wrote, in the transaction that wrote it (one multi-row insert in the same round trip as the
-- flight's upsert). changes maps each part that changed to [old, new]; superseded maps each
-- part a newer message had written to that message; events lists the outbox events written
-- for the flight. A message that ended SKIPPED wrote nothing: the history reads those from
-- proc_state. The rows are deleted by the statement that deletes their proc_state row
-- (queue.DeleteFinished), so the history is kept exactly as long as the processing records
-- (pipeline.proc-retention, R-RETAIN-1). No foreign key: its check would lock the proc_state
-- row in every snapshot batch, which replay and the backfill lock FOR UPDATE (R-GATE-1).
CREATE TABLE flight_change (
    msg_id     bigint      NOT NULL,
    flid       text        NOT NULL,
    msg_type   text        NOT NULL,
    styp       text        NOT NULL,
    -- why the flight is in the message: record, omitted, cascade, code-share (a master whose
    -- MAFL moved), the target's own for a FLOP
    cause      text        NOT NULL,
    state      text        NOT NULL,
    version    bigint      NOT NULL,
    changes    jsonb       NOT NULL DEFAULT '{}',
    superseded jsonb       NOT NULL DEFAULT '{}',
    events     jsonb       NOT NULL DEFAULT '[]',
    written_at timestamptz NOT NULL,
    PRIMARY KEY (flid, msg_id)
);
-- The retention sweep deletes by msg_id, and GetMessage reads a message's rows.
CREATE INDEX flight_change_msg ON flight_change (msg_id);

-- +goose Down
DROP TABLE flight_change;
ALTER TABLE flight_schd DROP COLUMN provenance;
