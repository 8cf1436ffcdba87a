"""Row locks of the webhooks app, each behind a name (the global order: docs/architecture.md).

Taken alone, after any domain transaction has committed: outbox events (SKIP LOCKED, the
dispatcher's claim), then an endpoint, then its delivery.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from core.models import OutboxEvent
from webhooks.models import Delivery, DeliveryStatus, WebhookEndpoint


def undispatched_events_skip_locked(limit: int) -> QuerySet[OutboxEvent]:
    """The oldest events not fanned out yet that no other dispatcher holds, locked."""
    return (
        OutboxEvent.objects.select_for_update(skip_locked=True)
        .filter(dispatched_at__isnull=True)
        .order_by("id")[:limit]
    )


def endpoint_lock(endpoint: WebhookEndpoint | int) -> WebhookEndpoint:
    """Re-read one endpoint under its row lock (failure counting, disabling, edits)."""
    pk = endpoint if isinstance(endpoint, int) else endpoint.pk
    return WebhookEndpoint.objects.select_for_update(no_key=True).get(pk=pk)


def delivery_skip_locked(delivery_id: int) -> Delivery | None:
    """One delivery under its row lock, or None while another worker holds it."""
    return (
        Delivery.objects.select_for_update(no_key=True, skip_locked=True, of=("self",))
        .select_related("endpoint", "event")
        .filter(pk=delivery_id)
        .first()
    )


def due_deliveries_skip_locked(
    *, now: datetime, limit: int, endpoint_id: int | None = None
) -> list[Delivery]:
    """The oldest pending deliveries due by `now` of enabled endpoints (of one endpoint when
    given) that no other worker holds, locked in one query."""
    due = Delivery.objects.select_for_update(no_key=True, skip_locked=True, of=("self",)).filter(
        status=DeliveryStatus.PENDING, next_attempt_at__lte=now, endpoint__enabled=True
    )
    if endpoint_id is not None:
        due = due.filter(endpoint_id=endpoint_id)
    return list(due.order_by("next_attempt_at", "id")[:limit])


def delivery_lock(delivery_id: int) -> Delivery:
    """One delivery under its row lock (waits for a worker that holds it)."""
    return (
        Delivery.objects.select_for_update(no_key=True, of=("self",))
        .select_related("endpoint", "event")
        .get(pk=delivery_id)
    )
