#!/bin/bash
# Runs once, when the primary's volume is empty (the image's /docker-entrypoint-initdb.d):
# a role for streaming replication, a physical replication slot for the replica (so the
# primary keeps the WAL the replica has not received yet, bounded by max_slot_wal_keep_size),
# and a pg_hba.conf line letting that role connect for replication with a password.
set -euo pipefail
: "${RAG_REPLICATION_PASSWORD:?set RAG_REPLICATION_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  --set=password="$RAG_REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'password';
SELECT pg_create_physical_replication_slot('replica_1');
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
