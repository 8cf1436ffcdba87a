"""The outbox: events other systems hear about, written in the transaction of the change.

Every app may call `emit(...)` inside the `transaction.atomic` of a use case; the row commits
with the change or not at all (no event lost, none phantom). The webhooks app fans committed
rows out to the organizations' endpoints (a periodic dispatcher, kicked on commit). core knows
the catalogue of event types but no app: organizations are plain ids here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.event_types import EVENT_TYPES
from core.models import OutboxEvent

__all__ = ["EVENT_TYPES", "emit", "emit_to"]

logger = logging.getLogger(__name__)

# The dispatcher's task, sent by name: core imports no app.
DISPATCH_TASK = "webhooks.dispatch"


def _json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(key): _json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json(item) for item in value]
    return value


def _kick() -> None:
    """Ask for a dispatch now; the periodic dispatcher catches up if the broker is away."""
    current_app.send_task(DISPATCH_TASK, ignore_result=True)


def _kick_on_commit() -> None:
    """One kick per transaction, however many events it wrote (settings.OUTBOX_KICK_ON_COMMIT).

    Robust: a broker hiccup must not undo the committed change, the beat dispatcher catches up.
    """
    if not settings.OUTBOX_KICK_ON_COMMIT:
        return
    connection = transaction.get_connection()
    if not any(func is _kick for _, func, _ in connection.run_on_commit):
        transaction.on_commit(_kick, robust=True)


def emit(
    *,
    organization_id: int,
    type: str,
    data: Mapping[str, Any],
    occurred_at: datetime | None = None,
) -> OutboxEvent:
    """Write one outbox event for one organization in the caller's transaction."""
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    event = OutboxEvent.objects.create(
        organization_id=organization_id,
        type=type,
        payload=_json(dict(data)),
        occurred_at=occurred_at or timezone.now(),
    )
    _kick_on_commit()
    return event


def emit_to(
    organization_ids: list[int],
    *,
    type: str,
    data: Mapping[str, Any],
    occurred_at: datetime | None = None,
) -> list[OutboxEvent]:
    """The same event for each of several organizations (e.g. both parties of a contract), in
    one INSERT."""
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    payload = _json(dict(data))
    at = occurred_at or timezone.now()
    events = OutboxEvent.objects.bulk_create(
        OutboxEvent(organization_id=organization_id, type=type, payload=payload, occurred_at=at)
        for organization_id in dict.fromkeys(organization_ids)
    )
    _kick_on_commit()
    return events
