-- +goose Up
-- A role's work paused by a dependency that does not answer (docs/architecture.md, "An outage is
-- not an attempt"): written by the role's holder on its lock connection when the outage begins
-- and cleared when the dependency answers again; a new term starts unblocked. GetStatus shows it
-- with the holder.
ALTER TABLE role_holder
    ADD COLUMN blocked_on     text,
    ADD COLUMN blocked_since  timestamptz,
    ADD COLUMN blocked_error  text,
    ADD COLUMN blocked_msg_id bigint,
    ADD COLUMN blocked_probes integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT role_holder_blocked CHECK ((blocked_on IS NULL) = (blocked_since IS NULL));

-- +goose Down
ALTER TABLE role_holder
    DROP CONSTRAINT role_holder_blocked,
    DROP COLUMN blocked_on,
    DROP COLUMN blocked_since,
    DROP COLUMN blocked_error,
    DROP COLUMN blocked_msg_id,
    DROP COLUMN blocked_probes;
