-- +goose Up
-- msgx_app: the runtime role the five services connect as (docs/security.md). It may read and
-- write the rows of the schema and nothing more: it owns no table, so it can neither create,
-- alter, drop nor truncate one. The migration runs as the schema owner; the services never do.
--
-- The role belongs to the whole server. It is created here NOLOGIN when missing and when the
-- migrating role may create roles; a deployment gives it a login (or grants it to per-service
-- login roles: GRANT msgx_app TO msgx_ingest). Without the right to create it, the grants
-- below wait for the role: create it (docs/security.md, "Database roles") before migrating.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'msgx_app') THEN
        BEGIN
            CREATE ROLE msgx_app NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL; -- created by a concurrent migration of another database
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'role msgx_app does not exist and this role may not create it: no runtime grants';
                RETURN;
        END;
    END IF;
    -- CONNECT on the database comes from PUBLIC's default; a deployment that revoked it
    -- grants it with the login role.
    GRANT USAGE ON SCHEMA public TO msgx_app;
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO msgx_app;
    GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO msgx_app;
    GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO msgx_app;
    -- The schema's version belongs to the migration alone.
    IF to_regclass('public.goose_db_version') IS NOT NULL THEN
        REVOKE ALL ON goose_db_version FROM msgx_app;
        GRANT SELECT ON goose_db_version TO msgx_app;
    END IF;
    -- Tables, sequences and functions later migrations create (as this same role) get the
    -- same grants, so no migration has to remember them.
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO msgx_app;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO msgx_app;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO msgx_app;
    -- Nobody but the owner creates objects in the schema (PostgreSQL 15's default, made
    -- explicit for older servers and for databases created from an older template).
    REVOKE CREATE ON SCHEMA public FROM PUBLIC;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'msgx_app') THEN
        ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM msgx_app;
        ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM msgx_app;
        ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON FUNCTIONS FROM msgx_app;
        REVOKE ALL ON ALL TABLES IN SCHEMA public FROM msgx_app;
        REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM msgx_app;
        REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM msgx_app;
        REVOKE ALL ON SCHEMA public FROM msgx_app;
    END IF;
END
$$;
-- +goose StatementEnd
