"""GPU replacement: every swap is recorded (contract event, lease event, the GPU's history) and a
replacement GPU's own rate is held by the database: positive, decided by a swap of the same
lease's contract, and equal to the rate that swap recorded."""

from __future__ import annotations

import importlib
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction

from contracts.choices import EventKind
from contracts.models import Contract, ContractEvent
from inventory.models import Gpu
from leasing.models import Allocation
from tests.leasing.factories import EXIT_TERMS, hour_from_now, make_nodes, make_offer

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
UPGRADE_TERMS = {**EXIT_TERMS, "replacement": "upgrade", "upgrade_factor": "0.9"}


def lease_of(client: Any, offer: Any, count: int) -> dict[str, Any]:
    """A lease of `count` GPUs from the next hour, as the API answers it."""
    response = client.post(
        LEASES,
        {"offer": offer.pk, "gpu_count": count, "start": hour_from_now(1).isoformat(), "hours": 48},
        format="json",
    )
    assert response.status_code == 201, response.json()
    return dict(response.json())


def test_a_like_for_like_swap_is_a_contract_event_and_a_row_of_the_gpus_history(
    client_for, provider, customer
):
    offer = make_offer(provider, nodes=2, gpus_per_node=4, contract_template=[UPGRADE_TERMS])
    lease = lease_of(client_for(customer), offer, 4)
    failed = lease["allocations"][0]["gpu_id"]

    response = client_for(provider).post(
        f"{LEASES}{lease['id']}/replace-gpu", {"gpu": failed}, format="json"
    )

    assert response.status_code == 200, response.json()
    new = next(a for a in response.json()["allocations"] if a["replaces"] is not None)
    assert (new["gpu_model"], new["rate_per_gpu_hour"]) == ("h200-sxm", None)
    event = ContractEvent.objects.get(pk=new["swap_event"])
    assert event.kind == EventKind.HARDWARE_REPLACEMENT_RATE and event.rate is None
    assert event.explanation.startswith(f"GPU {failed} replaced by GPU {new['gpu_id']} from ")
    assert "like-for-like: the rate stays at the contract's 2.400000" in event.explanation
    gpu = Gpu.objects.get(pk=failed)
    latest = gpu.history.order_by("-history_id").first()
    assert latest is not None
    assert (latest.health, gpu.health) == ("failed", "failed")
    assert latest.history_change_reason.startswith(
        f"health ok → failed: failed in lease {lease['id']}"
    )


def test_a_successor_is_priced_for_itself_and_the_lease_shows_its_model_and_rate(
    client_for, provider, customer
):
    offer = make_offer(
        provider,
        gpu_model_slug="rtx-4090",
        gpus_per_node=2,
        price_per_gpu_hour="0.40",
        nvlink=False,
        contract_template=[UPGRADE_TERMS],
    )
    make_nodes(offer.site, gpu_model_slug="rtx-5090", gpus_per_node=1, nvlink=False)
    lease = lease_of(client_for(customer), offer, 2)
    failed = lease["allocations"][0]["gpu_id"]

    answer = client_for(provider).post(
        f"{LEASES}{lease['id']}/replace-gpu", {"gpu": failed}, format="json"
    )

    assert answer.status_code == 200, answer.json()
    read = client_for(customer).get(f"{LEASES}{lease['id']}/").json()
    live = sorted(
        (a["gpu_model"], a["rate_per_gpu_hour"])
        for a in read["allocations"]
        if a["gpu_id"] != failed
    )
    assert live == [("rtx-4090", None), ("rtx-5090", "0.456538")]
    assert (read["gpu_model"], read["price_per_gpu_hour"]) == ("rtx-4090", "0.400000")
    history = client_for(customer).get(f"{LEASES}{lease['id']}/events/").json()["results"]
    [swap] = [row for row in history if row["kind"] == "gpu_replaced"]
    assert swap["inputs"]["rate_per_gpu_hour"] == "0.456538"
    assert swap["inputs"]["repriced"] is True


@pytest.fixture
def upgraded(client_for, provider, customer) -> Allocation:
    """A lease whose first RTX 4090 was swapped for an RTX 5090 at 0.456538."""
    offer = make_offer(
        provider,
        gpu_model_slug="rtx-4090",
        gpus_per_node=2,
        price_per_gpu_hour="0.40",
        nvlink=False,
        contract_template=[UPGRADE_TERMS],
    )
    make_nodes(offer.site, gpu_model_slug="rtx-5090", gpus_per_node=1, nvlink=False)
    lease = lease_of(client_for(customer), offer, 2)
    client_for(provider).post(
        f"{LEASES}{lease['id']}/replace-gpu",
        {"gpu": lease["allocations"][0]["gpu_id"]},
        format="json",
    )
    return Allocation.objects.get(lease_id=lease["id"], rate_per_gpu_hour__isnull=False)


@pytest.mark.parametrize("rate", [Decimal(0), Decimal("-0.10")])
def test_an_allocation_rate_must_be_positive(upgraded, rate):
    # Even a swap event that recorded such a rate cannot give it to a GPU.
    event = ContractEvent.objects.create(
        contract=upgraded.lease.contract,
        kind=EventKind.HARDWARE_REPLACEMENT_RATE,
        effective_at=upgraded.period.lower,
        explanation="a rate no swap decides",
        rate=rate,
    )
    with pytest.raises(IntegrityError, match="allocation_rate_positive"), transaction.atomic():
        Allocation.objects.filter(pk=upgraded.pk).update(rate_per_gpu_hour=rate, swap_event=event)


def test_an_allocation_rate_needs_a_swap(upgraded):
    original = Allocation.objects.filter(lease=upgraded.lease, replaces__isnull=True).first()
    assert original is not None
    with pytest.raises(IntegrityError, match="allocation_rate_from_a_swap"), transaction.atomic():
        Allocation.objects.filter(pk=original.pk).update(rate_per_gpu_hour=Decimal("0.30"))


def test_an_allocation_rate_other_than_its_swaps_is_refused(upgraded):
    with pytest.raises(IntegrityError, match="swap event"), transaction.atomic():
        Allocation.objects.filter(pk=upgraded.pk).update(rate_per_gpu_hour=Decimal("0.10"))
    upgraded.refresh_from_db()
    assert upgraded.rate_per_gpu_hour == Decimal("0.456538")


def test_an_event_that_is_not_a_swap_cannot_price_an_allocation(upgraded):
    not_a_swap = (
        ContractEvent.objects.filter(contract=upgraded.lease.contract)
        .exclude(kind=EventKind.HARDWARE_REPLACEMENT_RATE)
        .first()
    )
    assert not_a_swap is not None
    with pytest.raises(IntegrityError, match="swap event"), transaction.atomic():
        Allocation.objects.filter(pk=upgraded.pk).update(swap_event=not_a_swap)


def test_the_migration_gives_an_old_style_swapped_contract_its_leases_model_back(
    client_for, provider, customer
):
    migration = importlib.import_module("leasing.migrations.0010_allocation_rate_swap_event")
    offer = make_offer(provider, nodes=1, gpus_per_node=2, contract_template=[UPGRADE_TERMS])
    old_style, amended = (lease_of(client_for(customer), offer, 1) for _ in range(2))
    contracts = Contract.objects.filter(lease__id__in=[old_style["id"], amended["id"]])
    # What a swap did before: the contract took the successor's model and a rate event.
    contracts.update(leased_model_slug="b200")
    for contract in contracts.filter(lease__id=old_style["id"]):
        ContractEvent.objects.create(
            contract=contract,
            kind=EventKind.HARDWARE_REPLACEMENT_RATE,
            effective_at=contract.term_start,
            explanation="Hardware replaced: upgrade re-prices …",
            inputs={"policy": "upgrade", "old_rate": "2.40"},
            rate=Decimal("3.24"),
        )

    with connection.cursor() as cursor:
        cursor.execute(migration._RESTORE_LEASED_MODEL_SQL)

    models = dict(contracts.values_list("lease__id", "leased_model_slug"))
    # Only the contract an old-style swap changed; an operator's amendment stays.
    assert models == {old_style["id"]: "h200-sxm", amended["id"]: "b200"}


def test_the_lease_admin_page_shows_a_swapped_gpus_rate_and_swap(upgraded, client):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.test", "pw"))
    page = client.get(f"/admin/leasing/lease/{upgraded.lease_id}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "0.456538" in text
    assert f"{upgraded.lease.contract.number} hardware_replacement_rate" in text
