"""Idempotency-Key support: the same key and body get the first answer; another body gets 422.

Concurrent first uses are serialised by the unique (scope, key) index: the second INSERT waits
for the first transaction, then reads the stored answer instead of running the handler again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.errors import SemanticError, ValidationFailed
from core.models import IdempotencyRecord

MAX_KEY_LENGTH = 255


class IdempotencyKeyReused(SemanticError):
    """The key was first used with another request body or path."""

    code = "idempotency_key_reused"
    default_message = "This Idempotency-Key was already used with a different request."


@dataclass(frozen=True)
class StoredAnswer:
    """An HTTP answer as stored for replay."""

    status_code: int
    body: Any
    replayed: bool


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    """SHA-256 over method, path and the canonical JSON of the body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()


def idempotent_call(
    *,
    scope: str,
    key: str,
    method: str,
    path: str,
    body: Any,
    handler: Callable[[], tuple[int, Any]],
) -> StoredAnswer:
    """Run `handler` once per (scope, key); store and replay its answer unless it is a 5xx."""
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValidationFailed(
            "Idempotency-Key must be 1 to 255 characters.",
            code="invalid_idempotency_key",
            detail={"Idempotency-Key": key[:40]},
        )
    fingerprint = request_fingerprint(method=method, path=path, body=body)
    # Plain SQL on the record (core_idempotencyrecord, core.models.IdempotencyRecord): every
    # idempotent POST runs these three statements, the last one while the handler's row locks are
    # held, and building them through the ORM cost more CPU than running them.
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Waits on a concurrent uncommitted insert of the same key, then does nothing.
            cursor.execute(
                "INSERT INTO core_idempotencyrecord"
                " (scope, key, method, path, fingerprint, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (scope, key) DO NOTHING",
                [scope, key, method.upper(), path, fingerprint, timezone.now()],
            )
            cursor.execute(
                "SELECT id, fingerprint, path, status_code, response_body"
                " FROM core_idempotencyrecord WHERE scope = %s AND key = %s FOR UPDATE",
                [scope, key],
            )
            record_id, first_fingerprint, first_path, stored_status, stored_body = cursor.fetchone()
        if first_fingerprint != fingerprint:
            raise IdempotencyKeyReused(detail={"key": key, "first_used_on": first_path})
        if stored_status is not None:
            # jsonb arrives as text (Django's psycopg set-up leaves decoding to JSONField).
            replay = json.loads(stored_body) if isinstance(stored_body, str) else stored_body
            return StoredAnswer(stored_status, replay, replayed=True)
        status_code, response_body = handler()
        if status_code >= 500:
            # A server failure is not an answer: roll back so a retry runs the handler again.
            transaction.set_rollback(True)
            return StoredAnswer(status_code, response_body, replayed=False)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE core_idempotencyrecord SET status_code = %s, response_body = %s::jsonb"
                " WHERE id = %s",
                [status_code, json.dumps(response_body), record_id],
            )
        return StoredAnswer(status_code, response_body, replayed=False)


def idempotency_records_purge(*, older_than: timedelta | None = None) -> int:
    """Delete stored answers older than the configured TTL; returns how many were deleted."""
    ttl = older_than or timedelta(hours=settings.IDEMPOTENCY_KEY_TTL_HOURS)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=timezone.now() - ttl).delete()
    return deleted
