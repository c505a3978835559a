-- +goose Up
-- Authoritative current flight state (R-FLIGHT-1). Column names are the SIS tag names in lower
-- case; values are the SIS text as received (times stay in the SIS ddMMMyyHHmm form), NULL when
-- the field was never sent or was cleared by an empty tag. Attribute-plus-text elements get one
-- column for the text and one per attribute (fdiv, fdiv_ddes, fdiv_ddir).
CREATE TABLE flight_schd (
    flid           text        PRIMARY KEY,
    state          text        NOT NULL DEFAULT 'ACTIVE' CHECK (state IN ('ACTIVE', 'DELETED')),
    state_version  bigint      NOT NULL DEFAULT 0,
    operation_day  date,
    last_msg_id    bigint,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    deleted_at     timestamptz,
    -- collections ever sent for this flight, so "no allocation now" (no detail rows) is kept
    collections_present text[] NOT NULL DEFAULT '{}',
    ffid text,
    -- identity and plan
    alcd text, alsc text, flno text, mvin text, sodt text, flty text, flin text, acft text, reno text,
    -- turnaround and operation
    taop text, tafl text, taid text, trml text, csop text, csft text, maid text,
    -- times
    estt text, actt text, botm text, lacl text, fint text, appt text, egsr text, egst text,
    padt text, naat text, neat text, pedt text, ftss text,
    -- resources and status
    stnd text, phag text, fhag text, mhag text, cncl text, remc text, maxp text, vipp text,
    vipr text, lbno text, lbwt text, paxc text, exsc text, exsr text,
    -- attribute-plus-text elements
    fdiv text, fdiv_ddes text, fdiv_ddir text,
    fret text, fret_reid text,
    flab text, flab_ares text,
    bdpb text
);
-- Code-share: MAFL is derived from the children that point at a master (R-CODESHARE-2).
CREATE INDEX flight_schd_maid ON flight_schd (maid) WHERE maid IS NOT NULL;
CREATE INDEX flight_schd_operation_day ON flight_schd (operation_day);

-- Collections (R-FLIGHT-3): replaced whole per FLID when a message carries them, in message
-- order, never de-duplicated by resource number. source_seq is the upstream sequence attribute.
CREATE TABLE flight_gtdt (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE, ordinal integer NOT NULL,
    gtno text, gate text, pgot text, pgct text, gotm text, gctm text, gtyp text, PRIMARY KEY (flid, ordinal));
CREATE TABLE flight_ckdt (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE, ordinal integer NOT NULL,
    ckno text, chkc text, ccls text, pcot text, pcct text, cotm text, cctm text, ctyp text, PRIMARY KEY (flid, ordinal));
CREATE TABLE flight_cldt (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE, ordinal integer NOT NULL,
    clno text, belt text, bcls text, pcot text, pcct text, fbag text, lbag text, btyp text, PRIMARY KEY (flid, ordinal));
CREATE TABLE flight_chdt (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE, ordinal integer NOT NULL,
    chno text, chut text, ccls text, pcbt text, pcet text, cbtm text, cetm text, ctyp text, PRIMARY KEY (flid, ordinal));
CREATE TABLE flight_psdt (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE, ordinal integer NOT NULL,
    psno text, psst text, stst text, stet text, PRIMARY KEY (flid, ordinal));
CREATE TABLE flight_chot (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE, ordinal integer NOT NULL,
    csno text, chtm text, chid text, chst text, PRIMARY KEY (flid, ordinal));
CREATE TABLE flight_dely (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE, ordinal integer NOT NULL,
    code text, strt text, dura text, text text, PRIMARY KEY (flid, ordinal));
CREATE TABLE flight_abtm (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE, ordinal integer NOT NULL,
    asno text, abdg text, abop text, aotm text, PRIMARY KEY (flid, ordinal));
-- ROUT and ERUT are distinct kinds so equal sequence numbers never overwrite each other.
CREATE TABLE flight_route_point (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE,
    route_kind text NOT NULL CHECK (route_kind IN ('ROUT', 'ERUT')), ordinal integer NOT NULL,
    rtno text, apcd text, scat text, scdt text, PRIMARY KEY (flid, route_kind, ordinal));
-- SRVT and VIPF are kept as raw content only: not merged, not published (R-FLIGHT-3).
CREATE TABLE flight_raw_content (flid text NOT NULL REFERENCES flight_schd ON DELETE CASCADE,
    tag text NOT NULL CHECK (tag IN ('SRVT', 'VIPF')), ordinal integer NOT NULL,
    content text NOT NULL, PRIMARY KEY (flid, tag, ordinal));

-- Flights moved out of the current state by the history sweep (R-RETAIN-1).
CREATE TABLE flight_history (
    flid          text        NOT NULL,
    state_version bigint      NOT NULL,
    state         text        NOT NULL,
    operation_day date,
    snapshot      jsonb       NOT NULL,
    archived_at   timestamptz NOT NULL,
    PRIMARY KEY (flid, state_version)
);

-- Upstream requests and their answers (R-REQ-1).
CREATE TABLE req_track (
    req_id        bigserial   PRIMARY KEY,
    req_type      text        NOT NULL CHECK (req_type IN ('RQFD', 'RQRD')),
    req_styp      text        NOT NULL,
    covered_day   date,
    sndr          text        NOT NULL,
    state         text        NOT NULL DEFAULT 'PENDING' CHECK (state IN ('PENDING', 'SENT', 'DONE', 'EXPIRED')),
    seqn          integer,
    coutmsgs_id   bigint,
    answer_msg_id bigint,
    created_at    timestamptz NOT NULL,
    sent_at       timestamptz,
    done_at       timestamptz,
    expired_at    timestamptz,
    updated_at    timestamptz NOT NULL
);
-- One open request per (type, covered day, sender).
CREATE UNIQUE INDEX req_track_open ON req_track (req_type, req_styp, coalesce(covered_day, '0001-01-01'), sndr)
    WHERE state IN ('PENDING', 'SENT');

-- Reference data and resource status (R-REF-1).
CREATE TABLE ref_master (
    rtype         text        NOT NULL,
    rkey          text        NOT NULL,
    payload       jsonb       NOT NULL,
    source_msg_id bigint      NOT NULL,
    batch         text,
    refreshed_at  timestamptz NOT NULL,
    PRIMARY KEY (rtype, rkey)
);

-- Daily schedule processing trail: append-only, rebuildable, never used for decisions.
CREATE TABLE schd_snap_log (
    id          bigserial   PRIMARY KEY,
    msg_id      bigint      NOT NULL,
    styp        text        NOT NULL,
    recs        integer,
    applied     integer,
    deleted     integer,
    scope_start date,
    scope_end   date,
    outcome     text        NOT NULL,
    recv_at     timestamptz NOT NULL
);
CREATE INDEX schd_snap_log_scope ON schd_snap_log (scope_end, recv_at);

-- +goose Down
DROP TABLE schd_snap_log;
DROP TABLE ref_master;
DROP TABLE req_track;
DROP TABLE flight_history;
DROP TABLE flight_raw_content;
DROP TABLE flight_route_point;
DROP TABLE flight_abtm;
DROP TABLE flight_dely;
DROP TABLE flight_chot;
DROP TABLE flight_psdt;
DROP TABLE flight_chdt;
DROP TABLE flight_cldt;
DROP TABLE flight_ckdt;
DROP TABLE flight_gtdt;
DROP TABLE flight_schd;
