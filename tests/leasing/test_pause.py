"""Pausing a customer's interruptible leases for its money policy: cut at `now`, ended with the
reason `paused` and a sentence saying why, invoiced only up to the pause, nothing deleted, and
a rerun changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from contracts.choices import ContractStatus, EndReason, EventKind
from contracts.models import ContractEvent
from core.models import OutboxEvent
from leasing.choices import AllocationEnd, LeaseEventKind, LeaseStatus
from leasing.models import Allocation, Lease, LeaseEvent
from leasing.services.pause import interruptible_leases_pause
from tests.leasing.pool import make_pool

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
REASON = "the prepaid balance runs out in 1 day (policy: pause at 3 days)"


def lease_create(client, offer, *, count, start, hours, mode):
    response = client.post(
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": count,
            "start": start.isoformat(),
            "hours": hours,
            "pricing_mode": mode,
        },
    )
    assert response.status_code == 201, response.json()
    return Lease.objects.get(pk=response.json()["id"])


def test_live_interruptible_leases_are_cut_at_now_and_end_with_reason_paused(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider, nodes=3)
    client = client_for(customer)
    with time_machine.travel(T0, tick=False):
        running = lease_create(client, offer, count=4, start=T0, hours=48, mode="interruptible")
        later = lease_create(
            client, offer, count=2, start=T0 + timedelta(hours=10), hours=5, mode="interruptible"
        )
        on_demand = lease_create(client, offer, count=2, start=T0, hours=48, mode="on_demand")
        others = lease_create(
            client_for(other_customer), offer, count=2, start=T0, hours=48, mode="interruptible"
        )
    allocations_before = Allocation.objects.count()
    now = T0 + timedelta(hours=3)

    paused = interruptible_leases_pause(customer=customer, reason=REASON, actor="test", now=now)

    assert paused == 2
    assert Allocation.objects.count() == allocations_before  # nothing deleted
    running.refresh_from_db()
    assert running.status == LeaseStatus.ENDED
    assert running.end == now
    assert running.contract.status == ContractStatus.ENDED
    assert running.contract.end_reason == EndReason.PAUSED
    assert running.contract.ended_at == now
    cut = Allocation.objects.filter(lease=running)
    assert {a.period.upper for a in cut} == {now}
    assert {a.ended_reason for a in cut} == {AllocationEnd.PAUSED}
    assert all(a.released_at is None for a in cut)  # it served until the cut
    event = LeaseEvent.objects.get(lease=running, kind=LeaseEventKind.PAUSED)
    assert "money policy" in event.explanation and REASON in event.explanation
    assert event.inputs["gpus_stopped"] == 4
    assert ContractEvent.objects.filter(contract=running.contract, kind=EventKind.PAUSED).exists()

    # One that had not begun never ran: its allocations are released, it ends at its start.
    later.refresh_from_db()
    assert later.status == LeaseStatus.ENDED
    assert later.contract.end_reason == EndReason.PAUSED
    assert later.contract.ended_at == later.start
    assert all(a.released_at == now for a in Allocation.objects.filter(lease=later))

    # Other pricing modes and other customers are untouched.
    for untouched in (on_demand, others):
        untouched.refresh_from_db()
        assert untouched.status in (LeaseStatus.ACTIVE, LeaseStatus.PENDING_ACCEPTANCE)
        assert not LeaseEvent.objects.filter(lease=untouched, kind=LeaseEventKind.PAUSED).exists()

    ended = OutboxEvent.objects.filter(
        organization_id=customer.pk, type="lease.ended", payload__lease_id=running.pk
    )
    assert ended.count() == 1
    assert "paused" in ended.get().payload["explanation"]


def test_pausing_again_changes_nothing(client_for, provider, customer):
    offer, _ = make_pool(provider)
    with time_machine.travel(T0, tick=False):
        lease = lease_create(
            client_for(customer), offer, count=2, start=T0, hours=24, mode="interruptible"
        )
    now = T0 + timedelta(hours=1)
    assert interruptible_leases_pause(customer=customer, reason=REASON, actor="t", now=now) == 1
    events = LeaseEvent.objects.filter(lease=lease).count()
    outbox = OutboxEvent.objects.count()
    assert interruptible_leases_pause(customer=customer, reason=REASON, actor="t", now=now) == 0
    later = now + timedelta(hours=1)
    assert interruptible_leases_pause(customer=customer, reason=REASON, actor="t", now=later) == 0
    assert LeaseEvent.objects.filter(lease=lease).count() == events
    assert OutboxEvent.objects.count() == outbox


def test_the_lease_api_shows_the_pause_to_its_customer(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    with time_machine.travel(T0, tick=False):
        lease = lease_create(client, offer, count=1, start=T0, hours=24, mode="interruptible")
    interruptible_leases_pause(
        customer=customer, reason=REASON, actor="system:funds", now=T0 + timedelta(hours=2)
    )
    with time_machine.travel(T0 + timedelta(hours=2, minutes=1), tick=False):
        body = client.get(f"{LEASES}{lease.pk}/").json()
    assert body["status"] == "ended"
    assert body["end"].startswith("2026-12-07T11:00")
