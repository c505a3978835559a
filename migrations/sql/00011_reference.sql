-- +goose Up
-- Reference data and resource status (R-REF-1, docs/reference-data.md). ref_master (00002)
-- holds the 13 categories only; resource status events have their own table below.
ALTER TABLE ref_master ADD CONSTRAINT ref_master_rtype CHECK (rtype IN
    ('COUL', 'ARPT', 'AIRL', 'AIRC', 'REGN', 'ORGN', 'FLTL', 'TLST', 'GLST', 'SLST', 'CLST', 'BLST', 'CHLT'));

-- One row per category a message has changed: the newest message applied to it, so that a
-- replay of an older message is recognised as superseded instead of rewinding the category,
-- and the last full publication (DNLD/RESP).
CREATE TABLE ref_category (
    rtype            text        PRIMARY KEY CHECK (rtype IN
        ('COUL', 'ARPT', 'AIRL', 'AIRC', 'REGN', 'ORGN', 'FLTL', 'TLST', 'GLST', 'SLST', 'CLST', 'BLST', 'CHLT')),
    last_msg_id      bigint      NOT NULL,
    last_styp        text        NOT NULL,
    updated_at       timestamptz NOT NULL,
    published_msg_id bigint,
    published_batch  text,
    published_at     timestamptz,
    published_count  integer,
    CHECK ((published_msg_id IS NULL) = (published_at IS NULL))
);

-- Resource status events (RSTA, R-RSTA-2), one row per record as sent. A status is a
-- window in time, and an event that starts in the future leaves the one before it in force
-- until it starts, so the status at an instant needs the events, not only the newest one.
CREATE TABLE ref_resource_event (
    rtyp           text        NOT NULL CHECK (rtyp IN ('BELT', 'CNTR', 'GATE', 'STND')),
    rsid           text        NOT NULL,
    msg_id         bigint      NOT NULL,
    ordinal        integer     NOT NULL CHECK (ordinal > 0),
    stat           text        NOT NULL CHECK (stat IN ('E', 'D')),
    -- STRT, or the message's DTTM when the event carries no start.
    effective_from timestamptz NOT NULL,
    -- ENDT; only a disable has one, and it comes after the start.
    ends_at        timestamptz CHECK (ends_at IS NULL OR (stat = 'D' AND ends_at > effective_from)),
    strt           text        NOT NULL, -- as sent, '' when absent
    endt           text        NOT NULL,
    batch          text        NOT NULL,
    received_at    timestamptz NOT NULL,
    PRIMARY KEY (rtyp, rsid, msg_id, ordinal)
);

-- The read model for admin-api (R-REF-6, C-31): the effective reference data, one row
-- per (rtype, rkey), with the category's last full publication.
CREATE VIEW ref_effective AS
    SELECT m.rtype, m.rkey, m.payload, m.source_msg_id, m.batch, m.refreshed_at,
           c.published_at AS category_published_at, c.published_msg_id AS category_published_msg_id
    FROM ref_master m LEFT JOIN ref_category c USING (rtype);

-- Each resource's availability at an instant: the event in force is the last one sent among
-- those that have taken effect (effective_from <= at); a disable is unavailable in
-- [effective_from, ends_at), without ends_at until a later event takes effect; no event in force
-- means available (the default). It is the only implementation of the rule: pkg/refstore's
-- tests run it on the window cases of R-RSTA-2 (pkg/reference/referencetest). SECURITY DEFINER:
-- the reader role reads the result, not the event table.
-- +goose StatementBegin
CREATE FUNCTION ref_resource_availability_at(at timestamptz)
RETURNS TABLE (rtyp text, rsid text, available boolean, stat text, effective_from timestamptz,
               ends_at timestamptz, source_msg_id bigint, batch text, received_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
    SELECT r.rtyp, r.rsid,
           coalesce(NOT (g.stat = 'D' AND (g.ends_at IS NULL OR at < g.ends_at)), true),
           g.stat, g.effective_from, g.ends_at, g.msg_id, g.batch, g.received_at
    FROM (SELECT DISTINCT e.rtyp, e.rsid FROM ref_resource_event e) r
    LEFT JOIN LATERAL (
        SELECT e.stat, e.effective_from, e.ends_at, e.msg_id, e.batch, e.received_at
        FROM ref_resource_event e
        WHERE e.rtyp = r.rtyp AND e.rsid = r.rsid AND e.effective_from <= at
        ORDER BY e.msg_id DESC, e.ordinal DESC
        LIMIT 1) g ON true
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION ref_resource_availability_at(timestamptz) FROM PUBLIC;

CREATE VIEW ref_resource_availability AS
    SELECT * FROM ref_resource_availability_at(now());

-- +goose Down
DROP VIEW ref_resource_availability;
DROP FUNCTION ref_resource_availability_at(timestamptz);
DROP VIEW ref_effective;
DROP TABLE ref_resource_event;
DROP TABLE ref_category;
ALTER TABLE ref_master DROP CONSTRAINT ref_master_rtype;
