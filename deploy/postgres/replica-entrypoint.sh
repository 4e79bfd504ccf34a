#!/bin/bash
# The streaming replica: when its volume is empty, a base backup of the primary with -R
# (standby.signal and primary_conninfo written for us) through the slot the primary made;
# then the image's own entrypoint starts PostgreSQL, which finds the data and runs as a hot
# standby. Later starts skip the backup and resume streaming where they stopped.
set -euo pipefail
: "${PGDATA:?}" "${PRIMARY_HOST:?}" "${RAG_REPLICATION_PASSWORD:?}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA"
  chown -R postgres:postgres "$(dirname "$PGDATA")"
  chmod 700 "$PGDATA"
  until pg_isready --host "$PRIMARY_HOST" --port 5432 --quiet; do
    echo "replica: waiting for $PRIMARY_HOST" >&2
    sleep 2
  done
  conninfo="host=$PRIMARY_HOST port=5432 user=replicator password=$RAG_REPLICATION_PASSWORD application_name=${REPLICA_NAME:-replica_1}"
  gosu postgres pg_basebackup --dbname "$conninfo" --pgdata "$PGDATA" \
    --wal-method stream --slot "${REPLICA_SLOT:-replica_1}" --write-recovery-conf \
    --checkpoint fast --progress
  echo "replica: base backup done" >&2
fi
exec docker-entrypoint.sh postgres -c hot_standby=on -c hot_standby_feedback=on
