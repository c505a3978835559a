-- +goose Up
-- The pipeline's own records (R-OUTBOX-8, R-INGEST-1). Names are the design documents' names in
-- lower case. The shared MySQL inbox is not described here: the system never sends DDL to it.

-- Discovery cursor: the contiguous upper bound W of inbox IDs already enqueued, and when the
-- hole that currently stops it was first observed. One row, enforced by the CHECK.
CREATE TABLE inbox_cursor (
    id          smallint    PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    w           bigint      NOT NULL DEFAULT 0,
    hole_since  timestamptz,
    seeded_at   timestamptz,
    seed_mode   text        CHECK (seed_mode IN ('min', 'zero', 'max', 'id')),
    seed_value  bigint,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO inbox_cursor (id) VALUES (1);

-- Ranges of IDs released as permanent holes, watched for late arrivals until they are older
-- than the watch retention (closes R-INGEST-8: the watch survives restarts).
CREATE TABLE inbox_hole (
    first_id     bigint      PRIMARY KEY,
    last_id      bigint      NOT NULL CHECK (last_id >= first_id),
    released_at  timestamptz NOT NULL
);
CREATE INDEX inbox_hole_released ON inbox_hole (released_at);

-- Rows that appeared inside a released hole after the watermark had passed them.
CREATE TABLE inbox_late (
    msg_id       bigint      PRIMARY KEY,
    hole_first   bigint      NOT NULL,
    detected_at  timestamptz NOT NULL,
    enqueued_at  timestamptz
);

CREATE TABLE proc_state (
    msg_id                   bigint      PRIMARY KEY,
    state                    text        NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'FAILED', 'SUCCEEDED', 'SKIPPED', 'DEAD')),
    error_class              text
        CHECK (error_class IN ('MALFORMED', 'PROTOCOL', 'CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'EXHAUSTED')),
    last_error               text,
    attempts                 integer     NOT NULL DEFAULT 0,
    next_attempt_at          timestamptz,
    identity_key             text        UNIQUE,
    msg_type                 text,
    msg_styp                 text,
    received_at              timestamptz,
    enqueued_at              timestamptz NOT NULL,
    processing_started_at    timestamptz,
    finished_at              timestamptz,
    backfill_next_at         timestamptz,
    backfill_at              timestamptz,
    backfill_attempts        integer     NOT NULL DEFAULT 0,
    backfill_last_error      text,
    backfill_abandoned_at    timestamptz,
    backfill_abandon_reason  text        CHECK (backfill_abandon_reason IN ('MISSING_ROW', 'TRANSIENT_DEADLINE')),
    trace_parent             text,
    trace_state              text,
    updated_at               timestamptz NOT NULL,
    -- A terminal row always records when it finished; an unfinished one never owes a marker.
    CHECK ((state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')) = (finished_at IS NOT NULL)),
    CHECK (state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') OR (backfill_next_at IS NULL AND backfill_at IS NULL))
);
-- The queue head: the smallest unfinished msg_id.
CREATE INDEX proc_state_head ON proc_state (state, msg_id);
CREATE INDEX proc_state_unfinished ON proc_state (msg_id) WHERE state IN ('PENDING', 'FAILED');
-- The backfill sweep's fair rotation (R-BACKFILL-2).
CREATE INDEX proc_state_backfill ON proc_state (backfill_attempts, msg_id)
    WHERE backfill_at IS NULL AND backfill_abandoned_at IS NULL AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD');
CREATE INDEX proc_state_finished ON proc_state (finished_at) WHERE finished_at IS NOT NULL;

-- Outbox (R-OUTBOX-1). event_id is global and allocated in commit order because the pump is
-- the only event producer besides the history sweep, which serialises with it.
CREATE SEQUENCE msg_event_id_seq;
CREATE TABLE msg_event (
    event_id         bigint      PRIMARY KEY DEFAULT nextval('msg_event_id_seq'),
    target           text        NOT NULL CHECK (target IN ('KAFKA:msg', 'KAFKA:schd')),
    partition_key    text        NOT NULL,
    event_type       text        NOT NULL CHECK (event_type IN ('UPSERT', 'TOMBSTONE')),
    state_version    bigint      NOT NULL,
    payload          jsonb,
    msg_id           bigint,
    state            text        NOT NULL DEFAULT 'PENDING' CHECK (state IN ('PENDING', 'SENT', 'DEAD')),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz,
    last_error       text,
    trace_parent     text,
    trace_state      text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    sent_at          timestamptz,
    CHECK ((state = 'SENT') = (sent_at IS NOT NULL))
);
-- KAFKA:schd keeps one row per FLID (latest state only).
CREATE UNIQUE INDEX msg_event_schd_flid ON msg_event (partition_key) WHERE target = 'KAFKA:schd';
-- Per-target event heads.
CREATE INDEX msg_event_head ON msg_event (target, state, event_id);
CREATE INDEX msg_event_flid ON msg_event (target, partition_key, event_id) WHERE state <> 'SENT';
CREATE INDEX msg_event_sent ON msg_event (sent_at) WHERE state = 'SENT';

-- Who holds each role's advisory lock (written by the holder on acquisition).
CREATE TABLE role_holder (
    role         text        PRIMARY KEY,
    instance     text        NOT NULL,
    backend_pid  integer     NOT NULL,
    since        timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE role_holder;
DROP TABLE msg_event;
DROP SEQUENCE msg_event_id_seq;
DROP TABLE proc_state;
DROP TABLE inbox_late;
DROP TABLE inbox_hole;
DROP TABLE inbox_cursor;
