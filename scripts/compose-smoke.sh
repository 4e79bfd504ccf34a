#!/usr/bin/env bash
# For a machine with Docker: bring docker-compose.yml up, run the black-box suite
# (tests/blackbox) against its proxy, and tear everything down again, volumes included.
#
#   scripts/compose-smoke.sh [pytest arguments]
#
# The suite creates two tenants through the admin API, ingests, searches in every mode (the
# proxy spreads the requests over app1 and app2), checks that neither tenant ever sees the
# other's canary, that a tenant of the `basic` tier gets exactly its budget across both
# replicas and then 429 with Retry-After, and MCP at /mcp. Before it, this script checks that
# the replica streams from the primary. Passwords are random for each run.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
command -v docker >/dev/null || { echo "compose-smoke: docker is not installed" >&2; exit 2; }
docker compose version >/dev/null || { echo "compose-smoke: the Compose plugin is missing" >&2; exit 2; }

random() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-rag-smoke}"
export RAG_HTTP_PORT="${RAG_HTTP_PORT:-18000}"
export RAG_JWT_SECRET="${RAG_JWT_SECRET:-$(random)}"
export POSTGRES_PASSWORD="${POSTGRES_PASSWORD:-$(random)}"
export RAG_APP_DB_PASSWORD="${RAG_APP_DB_PASSWORD:-$(random)}"
export RAG_REPLICATION_PASSWORD="${RAG_REPLICATION_PASSWORD:-$(random)}"
ADMIN_TENANT=blackbox-admin

compose() { docker compose -f docker-compose.yml "$@"; }
finish() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    echo "compose-smoke: failed ($status); the last lines of each service:" >&2
    compose logs --no-color --tail=80 >&2 || true
  fi
  compose down --volumes --remove-orphans >/dev/null 2>&1 || true
  exit "$status"
}
trap finish EXIT

echo "compose-smoke: building and starting (the first build takes several minutes)" >&2
compose up --build --detach --wait --wait-timeout 900

streaming=$(compose exec -T db psql -U postgres -tAc \
  "select count(*) from pg_stat_replication where state = 'streaming'")
[ "$streaming" = 1 ] || { echo "compose-smoke: the replica is not streaming" >&2; exit 1; }
in_recovery=$(compose exec -T db-replica psql -U postgres -d rag -tAc "select pg_is_in_recovery()")
[ "$in_recovery" = t ] || { echo "compose-smoke: db-replica is not a standby" >&2; exit 1; }

# the first tenant comes from the command line: the admin API needs a token of an active tenant
compose exec -T app1 rag tenant create "$ADMIN_TENANT" --tier enterprise

# the suite's own environment: pytest, pytest-asyncio, httpx, python-jose and mcp (the
# project's .venv has them; scripts/test builds it)
source "$ROOT/scripts/_env.sh"
ensure_venv local,dev
RAG_BLACKBOX_URL="http://127.0.0.1:$RAG_HTTP_PORT" \
RAG_BLACKBOX_JWT_SECRET="$RAG_JWT_SECRET" \
RAG_BLACKBOX_ADMIN_TENANT="$ADMIN_TENANT" \
RAG_BLACKBOX_LIMITED_TIER=basic \
  "$VENV/bin/pytest" tests/blackbox --confcutdir tests/blackbox -p no:cacheprovider -q "$@"
echo "compose-smoke: passed" >&2
