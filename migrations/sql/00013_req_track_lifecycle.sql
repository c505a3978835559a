-- +goose Up
-- The upstream request lifecycle (R-REQ-1, issue #13; pkg/request, docs/control.md).
-- A request is registered with everything the dispatcher needs to write it to COUTMSGS: the
-- encoded XML is fixed at registration, so a retry after a crash writes (and finds) exactly the
-- same text.
CREATE SEQUENCE req_track_seqn AS bigint START 1;

ALTER TABLE req_track
    -- RQFD: '2026-03-01..2026-03-02' (from_day..to_day); RQRD: the category ('GLST'), or
    -- 'RSTA:<rtyp>' for resource status. One open request per (req_type, scope).
    ADD COLUMN scope      text,
    ADD COLUMN from_day   date,
    ADD COLUMN to_day     date,
    ADD COLUMN rtyp       text,
    ADD COLUMN payload    text,
    ADD COLUMN routing_id text,
    -- Set (committed) before each COUTMSGS insert the dispatcher tries: a request that has it
    -- but is still PENDING may have its row written already (a crash, an unanswered insert),
    -- so the next try looks for that row before it writes one.
    ADD COLUMN attempted_at timestamptz,
    -- The raw sequence value; the message carries it modulo 1,000,000 (sis.FormatSEQN).
    ALTER COLUMN seqn TYPE bigint;

-- Rows written before this migration (none were, no code registered requests) get a scope
-- from what they had, so the new index and the NOT NULL hold for them.
UPDATE req_track SET scope = coalesce(to_char(covered_day, 'YYYY-MM-DD'), req_styp) WHERE scope IS NULL;
ALTER TABLE req_track ALTER COLUMN scope SET NOT NULL;

ALTER TABLE req_track ADD CONSTRAINT req_track_rqfd_range
    CHECK (req_type <> 'RQFD' OR (from_day IS NOT NULL AND to_day IS NOT NULL AND from_day <= to_day)) NOT VALID;
ALTER TABLE req_track ADD CONSTRAINT req_track_sent_has_outbound
    CHECK (state <> 'SENT' OR (coutmsgs_id IS NOT NULL AND sent_at IS NOT NULL)) NOT VALID;

-- Registering a new request expires the older open one of the same type and scope, in the
-- same transaction; this index makes a second open one impossible whatever the writer.
DROP INDEX req_track_open;
CREATE UNIQUE INDEX req_track_open ON req_track (req_type, scope) WHERE state IN ('PENDING', 'SENT');

-- +goose Down
DROP INDEX req_track_open;
CREATE UNIQUE INDEX req_track_open ON req_track (req_type, req_styp, coalesce(covered_day, '0001-01-01'), sndr)
    WHERE state IN ('PENDING', 'SENT');
ALTER TABLE req_track DROP CONSTRAINT req_track_sent_has_outbound;
ALTER TABLE req_track DROP CONSTRAINT req_track_rqfd_range;
ALTER TABLE req_track
    DROP COLUMN scope, DROP COLUMN from_day, DROP COLUMN to_day, DROP COLUMN rtyp,
    DROP COLUMN payload, DROP COLUMN routing_id, DROP COLUMN attempted_at,
    ALTER COLUMN seqn TYPE integer;
DROP SEQUENCE req_track_seqn;
