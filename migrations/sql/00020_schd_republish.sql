-- +goose Up
-- Republish jobs (pkg/republish; docs/runbooks.md, "Kafka topic lost / consumer needs a full
-- reload"). The control API requests a job; the backfill role writes the current state of each
-- flight of the scope into the KAFKA:schd outbox row of its FLID, a page at a time under the
-- pipeline lock, and records its cursor and count in the same transaction as each page, so a
-- job resumes where it stopped after a crash or a failover of the backfill. The dispatcher sends
-- the rows as it sends every KAFKA:schd row.
CREATE TABLE schd_republish (
    republish_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- NULL: every flight of the current state; otherwise these FLIDs only, sorted and unique.
    flids            text[],
    state            text        NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'RUNNING', 'DONE', 'CANCELLED')),
    -- The last FLID done (flights are walked in FLID order).
    cursor           text        NOT NULL DEFAULT '',
    -- done of total flights written to the outbox; unknown: FLIDs of a scoped job that the
    -- current state does not hold (nothing to send for them).
    done             bigint      NOT NULL DEFAULT 0,
    total            bigint      NOT NULL DEFAULT 0,
    unknown          bigint      NOT NULL DEFAULT 0,
    requested_by     text        NOT NULL,
    comment          text        NOT NULL DEFAULT '',
    cancel_requested boolean     NOT NULL DEFAULT false,
    -- The last failure of a step (PostgreSQL not answering); the step is tried again.
    error            text        NOT NULL DEFAULT '',
    requested_at     timestamptz NOT NULL,
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL
);

-- At most one job is open: a second request gets the open one back (pkg/republish.Request).
CREATE UNIQUE INDEX schd_republish_one_open ON schd_republish ((true))
    WHERE state IN ('PENDING', 'RUNNING');

-- +goose Down
DROP TABLE schd_republish;
