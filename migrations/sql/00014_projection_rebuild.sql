-- +goose Up
-- On-demand checks and rebuilds of the Redis projection (issue #16; pkg/rebuild, docs/redis.md
-- "Rebuild"). The control API requests a job; the backfill role, which owns the consistency
-- sentinel, executes it page by page and records its cursor and counts in the same transaction
-- as each page, so a job survives a crash or a failover of the backfill and resumes where it
-- stopped.
CREATE TABLE projection_rebuild (
    rebuild_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- NULL: every flight of the current state (and a scan of Redis for extra keys); otherwise
    -- these FLIDs only, sorted and unique.
    flids            text[],
    dry_run          boolean     NOT NULL,
    state            text        NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'RUNNING', 'DONE', 'CANCELLED')),
    -- FLIGHTS: comparing flight_schd page by page (cursor: the last FLID done);
    -- EXTRA_DOCS / EXTRA_VERSIONS: scanning Redis for keys of unknown FLIDs (cursor: the SCAN /
    -- HSCAN cursor).
    phase            text        NOT NULL DEFAULT 'FLIGHTS'
        CHECK (phase IN ('FLIGHTS', 'EXTRA_DOCS', 'EXTRA_VERSIONS')),
    cursor           text        NOT NULL DEFAULT '',
    done             bigint      NOT NULL DEFAULT 0,
    total            bigint      NOT NULL DEFAULT 0,
    missing          bigint      NOT NULL DEFAULT 0,
    stale            bigint      NOT NULL DEFAULT 0,
    content          bigint      NOT NULL DEFAULT 0,
    extra            bigint      NOT NULL DEFAULT 0,
    repaired         bigint      NOT NULL DEFAULT 0,
    requested_by     text        NOT NULL,
    comment          text        NOT NULL DEFAULT '',
    cancel_requested boolean     NOT NULL DEFAULT false,
    -- The last failure of a step (Redis or PostgreSQL not answering); the step is tried again.
    error            text        NOT NULL DEFAULT '',
    requested_at     timestamptz NOT NULL,
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL
);

-- At most one job is open: a second request gets the open one back (pkg/rebuild.Request).
CREATE UNIQUE INDEX projection_rebuild_one_open ON projection_rebuild ((true))
    WHERE state IN ('PENDING', 'RUNNING');

-- +goose Down
DROP TABLE projection_rebuild;
