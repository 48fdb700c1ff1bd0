#!/usr/bin/env bash
# Start a throw-away PostgreSQL 16 + pgvector server for the `postgres` tests, from the pgserver
# wheel pinned in requirements.txt (Debian 12 packages no pgvector, and its PostgreSQL 15 cannot
# load the wheel's extension). It listens on a Unix socket in MIA_PG_DIR only.
# Usage:   eval "$(bash .ci/postgres.sh)"
# stdout carries only the `export MIA_TEST_POSTGRES_URL=...` line; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_DIR="${MIA_PG_DIR:-/tmp/mia-pgvector}"
PG_VENV="${MIA_PG_VENV:-/tmp/mia-pgserver-venv}"
log() { echo "[postgres.sh] $*" >&2; }

# pgserver and its three small dependencies only: .venv (make install) may not exist yet.
PGSERVER="$(grep -E '^pgserver==' requirements.txt)" || { log "requirements.txt pins no pgserver"; exit 1; }
if [ -x .venv/bin/python ] && .venv/bin/python -c "import pgserver" 2>/dev/null; then
    PYTHON=.venv/bin/python
else
    if ! "${PG_VENV}/bin/python" -c "import pgserver" 2>/dev/null; then
        log "installing ${PGSERVER} into ${PG_VENV}"
        { python3.11 -m venv "${PG_VENV}" 2>/dev/null || python3 -m venv "${PG_VENV}"; } >&2
        "${PG_VENV}/bin/python" -m pip install --quiet "${PGSERVER}" >&2
    fi
    PYTHON="${PG_VENV}/bin/python"
fi

# The tests' role is no superuser: the server script creates the extension for it.
log "starting PostgreSQL + pgvector in ${PG_DIR}"
"${PYTHON}" memory_db/pgvector_server.py "${PG_DIR}" --detach --database mia_test --user mia \
    --password mia --export MIA_TEST_POSTGRES_URL
log "ready"
