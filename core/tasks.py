"""Housekeeping tasks: thin wrappers around services."""

from __future__ import annotations

from celery import shared_task

from core.idempotency import idempotency_records_purge


@shared_task(name="core.ping")
def ping(value: str) -> str:
    """Echo a value back; proves a round trip through the broker and a real worker."""
    return f"pong:{value}"


@shared_task(name="core.purge_idempotency_records")
def purge_idempotency_records() -> int:
    """Drop stored Idempotency-Key answers past their TTL."""
    return idempotency_records_purge()
