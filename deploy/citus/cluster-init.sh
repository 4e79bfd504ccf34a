#!/bin/bash
# Wires a Citus cluster up for `rag migrate`; run once the nodes are healthy, again on every
# start (it is idempotent). It connects to each node as the superuser `postgres` and:
# - creates the service's runtime role (NOLOGIN: `rag migrate` gives it LOGIN and its password)
#   on every node, so that it exists wherever Citus connects as it;
# - tells every node the passwords Citus uses when one node connects to another, for the
#   superuser and for the runtime role (pg_dist_authinfo, nodeid 0: to any node);
# - tells the coordinator its own address and adds the workers it does not know yet;
# - prints the coordinator's active workers, one host:port per line.
#
# Environment (the compose file sets it; the tests point it at their own cluster):
#   CITUS_COORDINATOR   host:port of the coordinator, as the workers reach it
#   CITUS_WORKERS       host:port of each worker, separated by spaces
#   CITUS_DATABASE      the service's database, on every node with the citus extension
#   POSTGRES_PASSWORD   the superuser's password
#   RAG_APP_DB_PASSWORD the runtime role's password (the one in RAG_DATABASE_URL)
#   RAG_APP_ROLE        the runtime role's name (default rag_app)
set -euo pipefail

: "${CITUS_COORDINATOR:?host:port of the coordinator}"
: "${CITUS_WORKERS:?host:port of each worker, separated by spaces}"
: "${POSTGRES_PASSWORD:?the superuser password}"
: "${RAG_APP_DB_PASSWORD:?the runtime role password}"
database="${CITUS_DATABASE:-rag}"
role="${RAG_APP_ROLE:-rag_app}"
export PGPASSWORD="$POSTGRES_PASSWORD" PGCONNECT_TIMEOUT=10

# sql host:port [psql arguments...]: a statement as the superuser, bare output
sql() {
  psql -X -q -v ON_ERROR_STOP=1 -h "${1%:*}" -p "${1##*:}" -U postgres -d "$database" -tA "${@:2}"
}

read -r -a workers <<<"$CITUS_WORKERS"
for node in "$CITUS_COORDINATOR" "${workers[@]}"; do
  sql "$node" --set=role="$role" >/dev/null <<'SQL'
SELECT format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS', :'role')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SQL
  for pair in "postgres:$POSTGRES_PASSWORD" "$role:$RAG_APP_DB_PASSWORD"; do
    sql "$node" --set=name="${pair%%:*}" --set=info="password=${pair#*:}" >/dev/null <<'SQL'
INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo)
SELECT 0, :'name', :'info'
WHERE NOT EXISTS (SELECT FROM pg_dist_authinfo WHERE nodeid = 0 AND rolename = :'name');
UPDATE pg_dist_authinfo SET authinfo = :'info' WHERE nodeid = 0 AND rolename = :'name';
SQL
  done
done

sql "$CITUS_COORDINATOR" --set=host="${CITUS_COORDINATOR%:*}" --set=port="${CITUS_COORDINATOR##*:}" \
  >/dev/null <<'SQL'
SELECT citus_set_coordinator_host(:'host', :'port'::int);
SQL
for worker in "${workers[@]}"; do
  sql "$CITUS_COORDINATOR" --set=host="${worker%:*}" --set=port="${worker##*:}" >/dev/null <<'SQL'
SELECT citus_add_node(:'host', :'port'::int)
WHERE NOT EXISTS (SELECT FROM pg_dist_node WHERE nodename = :'host' AND nodeport = :'port'::int);
SQL
done
sql "$CITUS_COORDINATOR" -c \
  "SELECT node_name || ':' || node_port FROM citus_get_active_worker_nodes() ORDER BY 1"
