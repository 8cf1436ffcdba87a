"""Liveness of the two distributed parts: the database and the Celery broker."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from kombu import Connection


def check_database() -> str | None:
    """None when the database answers a query, else the error text."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def check_broker() -> str | None:
    """None when the broker accepts a connection within two seconds, else the error text."""
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    try:
        with Connection(settings.CELERY_BROKER_URL, transport_options=options) as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
