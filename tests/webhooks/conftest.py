"""Fixtures of the webhook tests: a loopback receiver, loopback allowed, short retry delays."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from accounts.models import Organization
from core.models import OutboxEvent
from tests.webhooks.receiver import Receiver
from webhooks.models import WebhookEndpoint
from webhooks.services.deliveries import outbox_dispatch
from webhooks.services.endpoints import webhook_endpoint_create
from webhooks.tasks import deliver

ALL_TYPES = [
    "lease.created",
    "lease.started",
    "lease.preempted",
    "lease.ended",
    "sublease.ended",
    "acceptance.decided",
    "contract.price_step",
    "contract.notice",
    "contract.terminated",
    "invoice.issued",
    "invoice.paid",
    "credit_note.issued",
    "usage.events_rejected",
    "capacity_signal.raised",
    "budget.threshold_crossed",
    "usage.alert",
    "balance.low",
    "deposit.held",
    "deposit.released",
    "payout.created",
    "payout.submitted",
    "payout.paid",
    "payout.failed",
]


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A webhook test never reaches a host other than loopback, whatever an endpoint says."""
    connect = socket.create_connection

    def guarded(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        assert ipaddress.ip_address(address[0]).is_loopback, f"a test tried to reach {address}"
        return connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)


@pytest.fixture
def loopback(settings: Any) -> Any:
    """Endpoints may be http:// on loopback (tests only); retries are due at once."""
    settings.WEBHOOKS_ALLOW_LOOPBACK = True
    settings.WEBHOOKS_RETRY_SCHEDULE_SECONDS = [0, 0, 0]
    return settings


@pytest.fixture
def receiver(loopback: Any) -> Iterator[Receiver]:
    server = Receiver().start()
    try:
        yield server
    finally:
        server.stop()


def endpoint_for(
    organization: Organization, receiver: Receiver, types: list[str] | None = None
) -> WebhookEndpoint:
    """An endpoint of the organization on the loopback receiver, for every type by default."""
    return webhook_endpoint_create(
        organization=organization, url=receiver.url, event_types=types or ALL_TYPES
    )


def pump(rounds: int = 1) -> None:
    """What beat and the workers do: a dispatcher run, then each claimed delivery's task."""
    for _ in range(rounds):
        outcome = outbox_dispatch()
        for delivery_id, claim_id in outcome.claimed:
            deliver(delivery_id, claim_id)


def events_of(organization: Organization, event_type: str) -> list[OutboxEvent]:
    return list(
        OutboxEvent.objects.filter(organization_id=organization.pk, type=event_type).order_by("id")
    )
