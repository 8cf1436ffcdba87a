"""Thin tasks of the webhooks app: the dispatcher (beat and on-commit kicks) and one attempt."""

from __future__ import annotations

from celery import shared_task

from webhooks.services.deliveries import delivery_attempt, outbox_dispatch


@shared_task(name="webhooks.dispatch")
def dispatch() -> dict[str, int]:
    """Fan new outbox events out to endpoints and send the deliveries that are due."""
    outcome = outbox_dispatch()
    return {
        "events": outcome.events,
        "deliveries_created": outcome.deliveries_created,
        "claimed": len(outcome.claimed),
    }


@shared_task(name="webhooks.deliver")
def deliver(delivery_id: int, claim_id: str) -> str:
    """Attempt one claimed delivery; a stale or repeated message does nothing."""
    return delivery_attempt(delivery_id=delivery_id, claim_id=claim_id)
