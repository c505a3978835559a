-- +goose Up
-- The version floor after a restore (R-RESTORE-1; docs/runbooks.md, "Restoring PostgreSQL
-- from a backup").
--
-- flight_version_floor: per FLID the highest STATE_VERSION Kafka already holds, read back from
-- both topics by `msgx-dispatcher version-floor` after PostgreSQL was restored and before the
-- services start. A restore rewinds flight_schd but not what consumers received, so a stored
-- flight below its floor is raised to it in the same transaction, and a FLID absent from the
-- restored state starts above it when it comes back (as above a history tombstone,
-- R-FLIGHT-7). Only ever raised, never lowered; kept, since a later restore to a backup taken
-- after this one must still not go below it.
CREATE TABLE flight_version_floor (
    flid        text        PRIMARY KEY,
    version     bigint      NOT NULL,
    recorded_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE flight_version_floor;
