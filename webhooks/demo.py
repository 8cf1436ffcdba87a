"""Demo webhooks: an endpoint of the demo customer, with the demo's events delivered to it.

Nothing listens for webhooks under `make run`, and endpoints never point at this service itself
(SSRF rules), so the seed brings its own receiver: a Standard Webhooks receiver on 127.0.0.1 and
an ephemeral port (webhooks.receiver) that verifies every signature. The endpoint is registered
at that address, with loopback allowed for the seed only (as the tests allow it), every event
of the demo's outbox is fanned out to it and attempted once by the same code the worker runs, and
the answers are recorded as attempts: Webhooks > Deliveries in the admin shows them delivered.
Then the receiver stops and the endpoint is disabled, so `make run`'s worker sends nothing
anywhere; point it at a receiver of yours and enable it to get the next events.
"""

from __future__ import annotations

from typing import TextIO

from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from accounts.models import Organization
from core.event_types import EVENT_TYPES
from webhooks.models import Delivery, DeliveryStatus, WebhookEndpoint
from webhooks.receiver import LoopbackReceiver
from webhooks.services.deliveries import (
    delivery_attempt,
    endpoint_deliveries_claim,
    outbox_fan_out,
)
from webhooks.services.endpoints import (
    EndpointChanges,
    webhook_endpoint_create,
    webhook_endpoint_update,
)

DESCRIPTION = (
    "Demo endpoint: seed_demo delivered the demo's events to a receiver it ran on loopback; "
    "point it at your receiver, then enable it"
)


def seed(out: TextIO) -> None:
    """Register the demo customer's endpoint, deliver the demo's outbox to it, disable it."""
    customer = Organization.objects.filter(slug="demo-customer").first()
    if customer is None or WebhookEndpoint.objects.filter(organization=customer).exists():
        out.write("  webhooks:           already seeded\n")
        return
    with LoopbackReceiver() as receiver, override_settings(WEBHOOKS_ALLOW_LOOPBACK=True):
        endpoint = webhook_endpoint_create(
            organization=customer,
            url=receiver.url,
            event_types=sorted(EVENT_TYPES),
            description=DESCRIPTION,
        )
        receiver.secret = endpoint.secret
        with transaction.atomic():
            events, _ = outbox_fan_out(now=timezone.now(), limit=10_000)
        for delivery_id, claim_id in endpoint_deliveries_claim(endpoint=endpoint, limit=10_000):
            delivery_attempt(delivery_id=delivery_id, claim_id=claim_id)
        webhook_endpoint_update(endpoint=endpoint, changes=EndpointChanges(enabled=False))
    delivered = Delivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.SUCCEEDED).count()
    waiting = Delivery.objects.filter(endpoint=endpoint).count() - delivered
    out.write(
        f"  webhooks:           1 endpoint of demo-customer (disabled after the seed), {events} "
        f"event(s) in the outbox, {delivered} delivered signed to a loopback receiver "
        f"({len(receiver.accepted)} verified), {waiting} not delivered\n"
    )
