#!/usr/bin/env bash
# Start a throw-away PostgreSQL (+ pgvector) server on 127.0.0.1 for the `postgres` tests.
# Usage (as root on Debian 12):   eval "$(bash .ci/postgres.sh)"
# stdout carries only the `export MIA_TEST_POSTGRES_URL=...` line; progress goes to stderr.
set -euo pipefail

PG_PORT="${MIA_PG_PORT:-55432}"
PG_DIR="${MIA_PG_DIR:-/tmp/mia-postgres}"
PG_DB="mia_test"
PG_USER="mia"
PG_PASSWORD="mia"

log() { echo "[postgres.sh] $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    log "run me as root (apt-get and the postgres system user need it)"
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
log "apt-get update"
apt-get update >&2
log "installing postgresql"
apt-get install -y --no-install-recommends postgresql >&2
PG_VERSION="$(ls /usr/lib/postgresql | sort -n | tail -1)"
# Debian 12 (bookworm) has no pgvector package; newer releases do. The memory store keeps its
# vector index in process and stores embeddings as bytes, so pgvector is optional.
if apt-cache show "postgresql-${PG_VERSION}-pgvector" >/dev/null 2>&1; then
    log "installing postgresql-${PG_VERSION}-pgvector"
    apt-get install -y --no-install-recommends "postgresql-${PG_VERSION}-pgvector" >&2
else
    log "postgresql-${PG_VERSION}-pgvector is not in this release's archive; continuing without pgvector"
fi
PG_BIN="/usr/lib/postgresql/${PG_VERSION}/bin"

as_postgres() { runuser -u postgres -- "$@"; }

# Our own data directory and port, so an existing cluster (or none) does not matter.
if [ ! -f "${PG_DIR}/PG_VERSION" ]; then
    log "initdb ${PG_DIR}"
    mkdir -p "${PG_DIR}"
    chown postgres:postgres "${PG_DIR}"
    chmod 700 "${PG_DIR}"
    as_postgres "${PG_BIN}/initdb" -D "${PG_DIR}" -U postgres --auth-local=trust --auth-host=scram-sha-256 >&2
fi

if ! as_postgres "${PG_BIN}/pg_ctl" -D "${PG_DIR}" status >/dev/null 2>&1; then
    log "starting server on 127.0.0.1:${PG_PORT}"
    as_postgres "${PG_BIN}/pg_ctl" -D "${PG_DIR}" -l "${PG_DIR}/server.log" -w \
        -o "-c listen_addresses=127.0.0.1 -p ${PG_PORT} -k ${PG_DIR}" start >&2
fi

psql_admin() { as_postgres "${PG_BIN}/psql" -h "${PG_DIR}" -p "${PG_PORT}" -U postgres -v ON_ERROR_STOP=1 -q "$@"; }

if ! psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname='${PG_USER}'" | grep -q 1; then
    psql_admin -c "CREATE ROLE ${PG_USER} LOGIN PASSWORD '${PG_PASSWORD}'" >&2
fi
if ! psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname='${PG_DB}'" | grep -q 1; then
    psql_admin -c "CREATE DATABASE ${PG_DB} OWNER ${PG_USER}" >&2
fi
# CREATE EXTENSION needs superuser; do it once here so the tests' user need not be one.
if [ -f "/usr/share/postgresql/${PG_VERSION}/extension/vector.control" ]; then
    psql_admin -d "${PG_DB}" -c "CREATE EXTENSION IF NOT EXISTS vector" >&2
fi

log "ready"
echo "export MIA_TEST_POSTGRES_URL=postgresql+psycopg://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${PG_PORT}/${PG_DB}"
