#!/bin/bash
# The streaming replica: when its volume is empty, a base backup of the primary with -R
# (standby.signal and primary_conninfo written for us) through the slot the primary made;
# then the image's own entrypoint starts PostgreSQL, which finds the data and runs as a hot
# standby. Later starts skip the backup and resume streaming where they stopped.
set -euo pipefail
: "${PGDATA:?}" "${PRIMARY_HOST:?}" "${RAG_REPLICATION_PASSWORD:?}"
port="${PRIMARY_PORT:-5432}" owner="${PGDATA_OWNER:-postgres}"  # the image's defaults
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  # copied beside, then renamed: a copy cut short is never mistaken for a data directory
  partial="$PGDATA.partial"
  rm -rf "$partial" "$PGDATA"
  mkdir -p "$partial"
  chown -R "$owner:$owner" "$(dirname "$PGDATA")"
  chmod 700 "$partial"
  until pg_isready --host "$PRIMARY_HOST" --port "$port" --quiet; do
    echo "replica: waiting for $PRIMARY_HOST" >&2
    sleep 2
  done
  # -R writes the password given in PGPASSWORD into primary_conninfo, quoted as needed
  conninfo="host=$PRIMARY_HOST port=$port user=replicator application_name=${REPLICA_NAME:-replica_1}"
  PGPASSWORD="$RAG_REPLICATION_PASSWORD" gosu "$owner" pg_basebackup --dbname "$conninfo" \
    --pgdata "$partial" --wal-method stream --slot "${REPLICA_SLOT:-replica_1}" \
    --write-recovery-conf --checkpoint fast --progress
  mv "$partial" "$PGDATA"
  echo "replica: base backup done" >&2
fi
# the primary's shared_buffers is a command-line option, which the base backup does not copy
exec docker-entrypoint.sh postgres -c hot_standby=on -c hot_standby_feedback=on \
  -c "shared_buffers=${POSTGRES_SHARED_BUFFERS:-512MB}"
