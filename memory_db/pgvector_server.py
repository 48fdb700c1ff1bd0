"""A local PostgreSQL 16 with pgvector for the memory store, from the `pgserver` wheel (no system packages).

    .venv/bin/python -m memory_db.pgvector_server .mia/pgvector        # runs until Ctrl-C
    .venv/bin/python -m memory_db.pgvector_server .mia/pgvector --detach   # starts it and returns
    .venv/bin/python -m memory_db.pgvector_server .mia/pgvector --stop

It prints the URL to put in mia.toml's `[memory] url` (or MIA_MEMORY_URL). The server listens on
a Unix socket in DATA_DIR only (no TCP port), as the operating system user running this (as
root, pgserver runs it as a `pgserver` user it creates); the data survives restarts.

Only the standard library and pgserver are imported, so `python memory_db/pgvector_server.py`
also runs in an environment that has nothing but pgserver (.ci/postgres.sh does that).
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
import warnings
from pathlib import Path

NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _pgserver():
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")  # platformdirs, harmless
    try:
        import pgserver
    except ImportError:
        sys.exit("pgserver is not installed: pip install pgserver==0.1.4 (requirements.txt has it)")
    return pgserver


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def prepare(server, database: str, user: str | None, password: str | None) -> str:
    """Create the database (and a login role owning it) with the vector extension; the store's URL."""
    owner = user or "postgres"
    if user and not server.psql(f"SELECT 1 FROM pg_roles WHERE rolname = {_quoted(user)};").count("(1 row)"):
        server.psql(f"CREATE ROLE {user} LOGIN PASSWORD {_quoted(password or user)};")
    if not server.psql(f"SELECT 1 FROM pg_database WHERE datname = {_quoted(database)};").count("(1 row)"):
        server.psql(f"CREATE DATABASE {database} OWNER {owner};")
    # CREATE EXTENSION needs a superuser; done here once, so the store's role need not be one
    server.psql(f"\\c {database}\nSET client_min_messages = warning;\nCREATE EXTENSION IF NOT EXISTS vector;")
    info = server.get_postmaster_info()
    credentials = f"{user}:{password or user}" if user else "postgres"
    return f"postgresql+psycopg://{credentials}@/{database}?host={info.socket_dir}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="the server's data folder (created on first use)")
    parser.add_argument("--database", default="mia", help="database to create (default: mia)")
    parser.add_argument("--user", help="a login role to create as the database's owner (default: postgres)")
    parser.add_argument("--password", help="its password (default: the user name; the socket trusts local users)")
    parser.add_argument("--detach", action="store_true", help="leave the server running and return")
    parser.add_argument("--stop", action="store_true", help="stop the server of DATA_DIR and return")
    parser.add_argument("--export", metavar="VARIABLE",
                        help="print `export VARIABLE=URL` (one line on stdout; progress on stderr)")
    args = parser.parse_args(argv)
    for name in (args.database, args.user):
        if name is not None and not NAME.match(name):
            parser.error(f"{name!r}: use lower-case letters, digits and _ (a PostgreSQL name)")
    pgserver = _pgserver()
    data_dir = args.data_dir.expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    if args.stop:
        if not (data_dir / "postmaster.pid").exists():
            print(f"no server is running in {data_dir}", file=sys.stderr)
            return
        owner = "pgserver" if os.geteuid() == 0 else None  # the user pgserver runs it as under root
        pgserver.pg_ctl(["-w", "stop"], pgdata=data_dir, user=owner)
        print(f"stopped the server in {data_dir}", file=sys.stderr)
        return
    started = time.perf_counter()
    server = pgserver.get_server(data_dir, cleanup_mode=None if args.detach else "stop")
    url = prepare(server, args.database, args.user, args.password)
    version = server.psql(f"\\c {args.database}\nSELECT extversion FROM pg_extension WHERE extname = 'vector';")
    version = next((line.strip() for line in version.splitlines() if re.match(r"^\s*\d+\.\d+", line)), "?")
    print(f"PostgreSQL with pgvector {version} ready in {time.perf_counter() - started:.1f} s "
          f"(data: {data_dir}; log: {data_dir / 'log'})", file=sys.stderr)
    if args.export:
        print(f"export {args.export}={url}", flush=True)
    else:
        print(f"[memory] url = \"{url}\"   (or MIA_MEMORY_URL={url})", flush=True)
    if args.detach:
        print(f"left running; stop it with: python -m memory_db.pgvector_server {args.data_dir} --stop",
              file=sys.stderr)
        return
    print("running; Ctrl-C stops it", file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
