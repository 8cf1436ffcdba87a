"""Hardware replacement, to the cent: each swapped GPU carries its own rate, computed from the
contract's base rate and the exit terms' clause, and the invoice bills each GPU model at its rate.

An 8 x RTX 4090 lease at 0.40 USD per GPU-hour under "upgrade x 0.9" loses two RTX 4090s to
RTX 5090s and then swaps one RTX 5090 for another. Every step goes through the doors people and
jobs use: the lease API (customer), the replace-gpu action (provider), the billing cycle task,
the invoice API. The figures are worked out by hand below.

    upgrade rate = 0.40 x 209.5 / 165.2 (dense BF16 TFLOPS, 5090 / 4090) x 0.9
                 = 0.456537530... → 0.456538 per GPU-hour (rates keep six places)
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from billing.models import Invoice, InvoiceStatus
from billing.tasks import run_cycle
from contracts.choices import EventKind
from contracts.models import ContractEvent
from inventory.models import Gpu
from leasing.models import Allocation, Lease
from tests.clock import clock_of
from tests.leasing.factories import EXIT_TERMS, make_nodes, make_offer

UPGRADE_TERMS = {**EXIT_TERMS, "replacement": "upgrade", "upgrade_factor": "0.9"}
BASE = Decimal("0.40")
UPGRADED = Decimal("0.456538")  # 0.40 x 209.5 / 165.2 x 0.9, six places
LEASES = "/api/v1/leases/"


at = clock_of(2027)


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"))


def replace_gpu(client: Any, lease_id: int, gpu_id: int, when: datetime) -> dict[str, Any]:
    """The provider swaps a failed GPU at `when`; the lease as the API answers it."""
    with time_machine.travel(when, tick=False):
        response = client.post(f"{LEASES}{lease_id}/replace-gpu", {"gpu": gpu_id}, format="json")
    assert response.status_code == 200, response.json()
    return dict(response.json())


def cycle(when: datetime) -> None:
    """What beat does every hour: the billing cycle task, as of `when`."""
    with time_machine.travel(when, tick=False):
        run_cycle.apply(args=[when.isoformat()]).get()


def card_hour_lines(invoice: dict[str, Any]) -> list[tuple[str, Decimal, Decimal, Decimal]]:
    """(model, GPU-hours, rate, amount) of each card-hour line of an invoice as the API answers."""
    return [
        (
            line["inputs"]["gpu_model"],
            Decimal(line["quantity"]),
            Decimal(line["unit_price"]),
            Decimal(line["amount"]),
        )
        for line in invoice["lines"]
        if line["kind"] == "card_hours"
    ]


@pytest.mark.django_db
def test_two_upgrades_and_a_like_for_like_swap_bill_each_gpu_model_at_its_rate(
    client_for: Any, provider: Any, customer: Any
) -> None:
    with time_machine.travel(at(1, 5), tick=False):
        offer = make_offer(
            provider,
            gpu_model_slug="rtx-4090",
            gpus_per_node=8,
            price_per_gpu_hour="0.40",
            nvlink=False,
            contract_template=[UPGRADE_TERMS],
        )
        # No spare RTX 4090 at the site, four free RTX 5090s (the 4090's successor).
        make_nodes(offer.site, gpu_model_slug="rtx-5090", gpus_per_node=4, nvlink=False)
        body = {
            "offer": offer.pk,
            "gpu_count": 8,
            "start": at(1, 10).isoformat(),
            "end": at(3, 1).isoformat(),
        }
        created = client_for(customer).post(LEASES, body, format="json")
    assert created.status_code == 201, created.json()
    lease_id = created.json()["id"]
    lease = Lease.objects.select_related("contract").get(pk=lease_id)
    assert lease.contract.billing_start == at(1, 10)
    first, second = sorted(a["gpu_id"] for a in created.json()["allocations"])[:2]
    ops = client_for(provider)

    # 01-15: a 4090 fails, no 4090 is free: a 5090 at the upgrade rate, for that GPU only.
    after_first = replace_gpu(ops, lease_id, first, at(1, 15))
    # 01-20: another 4090 fails: priced from the base rate again, not from 0.456538.
    after_second = replace_gpu(ops, lease_id, second, at(1, 20))
    upgraded_a = next(a for a in after_first["allocations"] if a["rate_per_gpu_hour"])
    # 01-25: the first 5090 fails and a free 5090 takes its place: like-for-like, same rate.
    after_third = replace_gpu(ops, lease_id, upgraded_a["gpu_id"], at(1, 25))

    live = [a for a in after_third["allocations"] if a["end"] == at(3, 1).isoformat()]
    assert sorted((a["gpu_model"], a["rate_per_gpu_hour"]) for a in live) == [
        ("rtx-4090", None),
        ("rtx-4090", None),
        ("rtx-4090", None),
        ("rtx-4090", None),
        ("rtx-4090", None),
        ("rtx-4090", None),
        ("rtx-5090", "0.456538"),
        ("rtx-5090", "0.456538"),
    ]
    assert [
        a["rate_per_gpu_hour"] for a in after_second["allocations"] if a["gpu_model"] == "rtx-5090"
    ] == ["0.456538", "0.456538"]

    # The contract keeps its model and base rate; every swap is a contract event with a sentence.
    lease.contract.refresh_from_db()
    assert lease.contract.leased_model_slug == "rtx-4090"
    assert lease.contract.base_rate_per_gpu_hour == BASE
    swaps = list(
        ContractEvent.objects.filter(
            contract=lease.contract, kind=EventKind.HARDWARE_REPLACEMENT_RATE
        ).order_by("effective_at")
    )
    assert [(e.effective_at, e.rate) for e in swaps] == [
        (at(1, 15), UPGRADED),
        (at(1, 20), UPGRADED),
        (at(1, 25), UPGRADED),
    ]
    assert "0.400000 x (209.5 / 165.2 throughput" in swaps[1].explanation
    assert "like-for-like: the rate stays at 0.456538" in swaps[2].explanation
    # Each failed GPU's health change is a row of its history.
    for gpu_id in (first, second, upgraded_a["gpu_id"]):
        gpu = Gpu.objects.get(pk=gpu_id)
        assert gpu.health == "failed"
        reasons = list(gpu.history.values_list("history_change_reason", flat=True))
        assert any(r and r.startswith("health ok → failed") for r in reasons), reasons

    # --- January [01-10, 02-01): 22 days.
    cycle(at(2, 1, 2))
    reader = client_for(customer)
    january_id = Invoice.objects.get(contract=lease.contract, period_start=at(1, 10)).pk
    january = reader.get(f"/api/v1/invoices/{january_id}/").json()
    assert january["status"] == InvoiceStatus.FINALIZED
    # 4090s: six all month (6 x 528 h) + the first until 01-15 (120 h) + the second until
    # 01-20 (240 h) = 3,528 GPU-hours at 0.40 = 1,411.20.
    # 5090s: A 01-15..01-25 (240 h) + B 01-20..02-01 (288 h) + C 01-25..02-01 (168 h)
    # = 696 GPU-hours at 0.456538 = 317.750448 → 317.75.
    assert card_hour_lines(january) == [
        ("NVIDIA GeForce RTX 4090", Decimal("3528.000000"), BASE, cents(Decimal("1411.20"))),
        ("NVIDIA GeForce RTX 5090", Decimal("696.000000"), UPGRADED, cents(Decimal("317.75"))),
    ]
    assert Decimal(january["total"]) == Decimal("1728.95")
    descriptions = [line["description"] for line in january["lines"]]
    assert "8 x NVIDIA GeForce RTX 4090 @ 0.4: 3528 GPU-hours" in descriptions[0]
    assert "3 x NVIDIA GeForce RTX 5090 @ 0.456538: 696 GPU-hours" in descriptions[1]
    # The 5090 line points to the swaps that priced its GPUs.
    assert sorted(e["id"] for e in january["lines"][1]["events"]) == sorted(e.pk for e in swaps)

    # --- February [02-01, 03-01): 28 days, six 4090s and two 5090s all month.
    cycle(at(3, 1, 2))
    february_id = Invoice.objects.get(contract=lease.contract, period_start=at(2, 1)).pk
    february = reader.get(f"/api/v1/invoices/{february_id}/").json()
    # 6 x 672 h = 4,032 h x 0.40 = 1,612.80; 2 x 672 h = 1,344 h x 0.456538 = 613.587072.
    assert card_hour_lines(february) == [
        ("NVIDIA GeForce RTX 4090", Decimal("4032.000000"), BASE, cents(Decimal("1612.80"))),
        ("NVIDIA GeForce RTX 5090", Decimal("1344.000000"), UPGRADED, cents(Decimal("613.59"))),
    ]
    assert Decimal(february["total"]) == Decimal("2226.39")
    assert "6 x NVIDIA GeForce RTX 4090 @ 0.4:" in february["lines"][0]["description"]
    assert "2 x NVIDIA GeForce RTX 5090 @ 0.456538:" in february["lines"][1]["description"]

    # Lease, contract and invoice agree: the lease's live GPUs are the invoice's February GPUs.
    models = Allocation.objects.filter(lease=lease, period__contains=at(2, 15)).values_list(
        "node__gpu_model__slug", flat=True
    )
    assert sorted(models) == ["rtx-4090"] * 6 + ["rtx-5090"] * 2
