#!/usr/bin/env bash
# docker-compose only. The postgres image runs this once, when it initialises an empty data
# directory (docker-entrypoint-initdb.d), after it created the database $POSTGRES_DB.
#
# Two login roles, and nothing in the stack runs as the superuser:
# - msgx owns the msgx database and its schema: only the migration connects as it;
# - msgx_app is the runtime role the five services connect as. Migration 00015 grants it
#   SELECT, INSERT, UPDATE, DELETE on the schema's tables (and on every table later migrations
#   create); it owns nothing, so it can create, alter, drop or truncate nothing.
# The superuser `postgres` stays for developers and for the test harness, which creates and
# drops a database per test package.
#
# psql's :'pw' quoting keeps any password intact; no shell text is pasted into SQL.
# No `set` here: the entrypoint sources this file, and its own `set -e` already stops the
# initialisation on any failing command; `set -u` would leak into the rest of the entrypoint.

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
	--set=pw="${MSGX_PG_PASSWORD:?MSGX_PG_PASSWORD must be set}" \
	--set=apppw="${MSGX_PG_APP_PASSWORD:?MSGX_PG_APP_PASSWORD must be set}" \
	--set=db="$POSTGRES_DB" <<'SQL'
CREATE ROLE msgx LOGIN PASSWORD :'pw';
ALTER DATABASE :"db" OWNER TO msgx;
CREATE ROLE msgx_app LOGIN PASSWORD :'apppw';
\connect :"db"
ALTER SCHEMA public OWNER TO msgx;
SQL
