-- +goose Up
-- msgx_reader: the read-only role admin-api connects with (R-REF-6, C-31;
-- docs/reference-data.md). It reads the committed flight state and the reference read model and
-- nothing else: no pipeline table, no write.
--
-- A role belongs to the whole server, not to this database: it is created only when missing
-- (another database of the same server may have created it already, and two migrations may run
-- at the same moment), and it gets no password here. Until an operator sets one
-- (ALTER ROLE msgx_reader PASSWORD ...) password authentication refuses it.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'msgx_reader') THEN
        CREATE ROLE msgx_reader LOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created by a concurrent migration of another database
END
$$;
-- +goose StatementEnd

GRANT SELECT ON flight_schd, flight_gtdt, flight_ckdt, flight_cldt, flight_chdt, flight_psdt, flight_chot,
    flight_dely, flight_abtm, flight_route_point, flight_raw_content, flight_history,
    ref_effective, ref_resource_availability TO msgx_reader;
GRANT EXECUTE ON FUNCTION ref_resource_availability_at(timestamptz) TO msgx_reader;

-- +goose Down
-- The role stays: other databases of the server may grant it privileges of their own, and
-- DROP ROLE would fail on them. Only this database's privileges go.
REVOKE ALL ON flight_schd, flight_gtdt, flight_ckdt, flight_cldt, flight_chdt, flight_psdt, flight_chot,
    flight_dely, flight_abtm, flight_route_point, flight_raw_content, flight_history,
    ref_effective, ref_resource_availability FROM msgx_reader;
REVOKE ALL ON FUNCTION ref_resource_availability_at(timestamptz) FROM msgx_reader;
