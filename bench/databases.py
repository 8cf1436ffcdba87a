"""The benchmarks' databases: each benchmark builds its data in a database of its own, on the
server of DATABASE_URL or, without it, on the embedded one (config.embedded_db)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parent.parent


def server_url() -> str:
    """The server the project uses: DATABASE_URL, or the embedded one (started if needed)."""
    url = os.environ.get("DATABASE_URL", "")
    if url:
        return url
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from config.embedded_db import database_url

    return database_url()


def with_database(url: str, name: str) -> str:
    """The same server's URL with another database."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def admin_connection(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """An autocommit connection to the server's maintenance database (`postgres`)."""
    admin = with_database(url, "postgres").replace("postgres://", "postgresql://", 1)
    return psycopg.connect(admin, autocommit=True)


def ensure_database(url: str, name: str) -> str:
    """Create the database `name` on the server if it is missing; return its URL."""
    with admin_connection(url) as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not found:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_database(url, name)


def drop_database(url: str, name: str) -> None:
    """Drop the database `name` if it exists, whoever is still connected to it."""
    with admin_connection(url) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def recreate_database(url: str, name: str) -> str:
    """An empty database `name` on the server (dropped first if it exists); returns its URL."""
    drop_database(url, name)
    return ensure_database(url, name)


def django_on(database: str, *, memory_broker: bool = True) -> None:
    """Django on a benchmark's own database (created if missing), migrated, as production runs
    it: no query log (DEBUG off); tasks go to an in-memory broker unless `memory_broker` is
    False (a run on real workers uses the broker of CELERY_BROKER_URL)."""
    os.environ["DATABASE_URL"] = ensure_database(server_url(), database)
    os.environ.pop("DATABASE_NAME", None)
    os.environ["DEBUG"] = "false"
    if memory_broker:
        os.environ["CELERY_BROKER_URL"] = "memory://localhost/"
    os.environ["CELERY_RESULT_BACKEND"] = "cache+memory://"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ENV", "test")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
