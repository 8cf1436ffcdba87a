"""Demo webhooks: an endpoint of the demo customer, and the demo's events fanned out to it.

The endpoint points at a public address (example.com) and is left disabled, so `make run`'s
worker sends nothing off the machine: the deliveries wait in the admin (Webhooks > Deliveries)
until someone points the endpoint at a receiver of theirs and enables it.
"""

from __future__ import annotations

from typing import TextIO

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from core.event_types import EVENT_TYPES
from webhooks.models import Delivery, WebhookEndpoint
from webhooks.services.deliveries import outbox_fan_out
from webhooks.services.endpoints import (
    EndpointChanges,
    webhook_endpoint_create,
    webhook_endpoint_update,
)

DEMO_URL = "https://93.184.215.14/cardhour-webhooks"


def seed(out: TextIO) -> None:
    """Register the demo customer's endpoint, fan the demo's outbox out to it, disable it."""
    customer = Organization.objects.filter(slug="demo-customer").first()
    if customer is None or WebhookEndpoint.objects.filter(organization=customer).exists():
        out.write("  webhooks:           already seeded\n")
        return
    # One transaction: no worker sees the endpoint enabled, so nothing is sent off the machine.
    with transaction.atomic():
        endpoint = webhook_endpoint_create(
            organization=customer,
            url=DEMO_URL,
            event_types=sorted(EVENT_TYPES),
            description="Demo endpoint: point it at your receiver, then enable it",
        )
        events, _ = outbox_fan_out(now=timezone.now(), limit=10_000)
        webhook_endpoint_update(endpoint=endpoint, changes=EndpointChanges(enabled=False))
    waiting = Delivery.objects.filter(endpoint=endpoint).count()
    out.write(
        f"  webhooks:           1 endpoint of demo-customer (disabled), {events} "
        f"event(s) in the outbox, {waiting} delivery(ies) waiting for it\n"
    )
