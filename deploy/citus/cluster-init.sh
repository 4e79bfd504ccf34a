#!/bin/bash
# One-shot, after the three nodes are healthy (idempotent):
# - every node learns the passwords Citus uses when one node connects to another, for the
#   superuser and for the service's runtime role (pg_dist_authinfo, nodeid 0: to any node);
# - the coordinator learns its own name and its workers;
# - pgvector is created (CREATE EXTENSION on the coordinator reaches the workers).
set -euo pipefail
export PGPASSWORD="$POSTGRES_PASSWORD"
sql() { psql -v ON_ERROR_STOP=1 -h "$1" -U postgres -d rag -tA "${@:2}"; }
for node in coordinator worker1 worker2; do
  for pair in "postgres:$POSTGRES_PASSWORD" "rag_app:$RAG_APP_DB_PASSWORD"; do
    sql "$node" --set=role="${pair%%:*}" --set=info="password=${pair#*:}" <<'SQL'
INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo)
SELECT 0, :'role', :'info'
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_authinfo WHERE nodeid = 0 AND rolename = :'role');
SQL
  done
done
sql coordinator -c "SELECT citus_set_coordinator_host('coordinator', 5432)"
for worker in worker1 worker2; do
  if [ "$(sql coordinator -c "SELECT count(*) FROM pg_dist_node WHERE nodename = '$worker'")" = 0 ]; then
    sql coordinator -c "SELECT citus_add_node('$worker', 5432)"
  fi
done
sql coordinator -c "CREATE EXTENSION IF NOT EXISTS vector"
sql coordinator -c "SELECT nodename, nodeport FROM citus_get_active_worker_nodes()"
