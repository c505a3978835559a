#!/usr/bin/env bash
# docker-compose only. The postgres image runs this once, when it initialises an empty data
# directory (docker-entrypoint-initdb.d), after it created the database $POSTGRES_DB.
#
# The services connect as their own login role, msgx, which owns the msgx database (and so, on
# PostgreSQL 15, may create tables in its public schema): the migration needs nothing more, and
# nothing in the stack runs as the superuser. The superuser `postgres` stays for developers and
# for the test harness, which creates and drops a database per test package.
#
# psql's :'pw' quoting keeps any password intact; no shell text is pasted into SQL.
# No `set` here: the entrypoint sources this file, and its own `set -e` already stops the
# initialisation on any failing command; `set -u` would leak into the rest of the entrypoint.

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
	--set=pw="${MSGX_PG_PASSWORD:?MSGX_PG_PASSWORD must be set}" \
	--set=db="$POSTGRES_DB" <<'SQL'
CREATE ROLE msgx LOGIN PASSWORD :'pw';
ALTER DATABASE :"db" OWNER TO msgx;
SQL
