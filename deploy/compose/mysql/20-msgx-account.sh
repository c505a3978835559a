#!/usr/bin/env bash
# docker-compose only. The mysql image runs this once, when it initialises an empty data
# directory, right after 10-shared_inbox.sql (migrations/devfixture) created cminmsgs and
# coutmsgs in $MYSQL_DATABASE.
#
# In production the shared inbox belongs to the database team and our account may only read new
# rows, insert (compat HTTP, outbound requests) and update the processed marker: SELECT, INSERT,
# UPDATE on the two tables and nothing else — no DDL, no DELETE, no other table. The compose
# services use exactly such an account, so a statement that needs more fails here, not in
# production.
# No `set` here: the entrypoint sources this file, and its own `set -e` already stops the
# initialisation on any failing command; `set -u` would leak into the rest of the entrypoint.

pw=${MSGX_MYSQL_PASSWORD:?MSGX_MYSQL_PASSWORD must be set}
# Escape for a single-quoted SQL string literal.
pw=${pw//\\/\\\\}
pw=${pw//\'/\'\'}
db=${MYSQL_DATABASE:?MYSQL_DATABASE must be set}

sql="CREATE USER IF NOT EXISTS 'msgx'@'%' IDENTIFIED BY '${pw}';
GRANT SELECT, INSERT, UPDATE ON \`${db}\`.\`cminmsgs\` TO 'msgx'@'%';
GRANT SELECT, INSERT, UPDATE ON \`${db}\`.\`coutmsgs\` TO 'msgx'@'%';"

# The entrypoint sources non-executable scripts and then offers docker_process_sql, which knows
# the temporary server's socket and root credentials; when run as a program, use the client.
if declare -F docker_process_sql >/dev/null; then
	docker_process_sql --database=mysql <<<"$sql"
else
	mysql --protocol=socket -uroot ${MYSQL_ROOT_PASSWORD:+"-p${MYSQL_ROOT_PASSWORD}"} mysql <<<"$sql"
fi
echo "msgx: created MySQL account 'msgx' with SELECT, INSERT, UPDATE on ${db}.cminmsgs and ${db}.coutmsgs"
