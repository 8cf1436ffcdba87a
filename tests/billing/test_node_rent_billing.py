"""Whole-server monthly rent billed through the billing cycle, to the cent.

Each period's rent = nodes x monthly rent x (seconds leased in the calendar month ÷ seconds in
that month); the arithmetic is written out below. The SLA clause credits the rent as it
credits card-hours.
"""

from __future__ import annotations

from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
import time_machine

from billing.models import Invoice
from billing.services.cycle import billing_cycle_run
from contracts.choices import EventKind
from core.errors import Conflict
from leasing.models import Lease
from leasing.services.leases import lease_create, request_build
from tests.clock import clock_of
from tests.contracts.factories import ACCEPTANCE_TOKENS, SLA_LADDER
from tests.leasing.factories import EXIT_TERMS, make_offer, outage
from tests.scenarios import acceptance_passed

at = clock_of(2027)
RENT = Decimal("30000")
DAY = 86400

pytestmark = pytest.mark.django_db


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def lines_of(invoice: Invoice) -> list[tuple[str, Decimal, Decimal, Decimal]]:
    return [
        (line.kind, line.quantity, line.unit_price, line.amount)
        for line in invoice.lines.order_by("position")
    ]


def cycle(when: datetime) -> None:
    with time_machine.travel(when, tick=False):
        billing_cycle_run(now=when, deliver=False)


def rent_lease(
    provider: Any,
    customer: Any,
    *,
    nodes: int,
    start: datetime,
    end: datetime,
    extra: tuple[dict[str, Any], ...] = (),
) -> Lease:
    """`nodes` whole 8-GPU servers at 30,000 USD per node-month, accepted at the start."""
    with time_machine.travel(at(1, 2), tick=False):
        offer = make_offer(
            provider,
            nodes=nodes,
            price_unit="node_month",
            price_per_node_month=RENT,
            interruptible_price_per_gpu_hour=None,
            contract_template=[ACCEPTANCE_TOKENS, SLA_LADDER, *extra],
        )
    with time_machine.travel(at(1, 3), tick=False):
        lease = lease_create(
            customer=customer,
            request=request_build(offer=offer, gpu_count=8 * nodes, start=start, end=end),
            actor="customer",
        )
    return acceptance_passed(lease, start)


def test_a_31_day_then_28_day_month_prorated_by_the_second_with_an_outage_credit(
    provider: Any, customer: Any
) -> None:
    lease: Lease = rent_lease(provider, customer, nodes=2, start=at(1, 10), end=at(2, 20))
    contract = lease.contract
    node = lease.allocations.order_by("node_id").first().node  # type: ignore[union-attr]

    # --- January (31 days): leased from 01-10 00:00 to 02-01 00:00 = 22 days.
    cycle(at(2, 1, 2))
    january = Invoice.objects.get(contract=contract, period_start=at(1, 10))
    january_seconds, january_month = 22 * DAY, 31 * DAY  # 1,900,800 of 2,678,400 s
    january_rent = cents(2 * RENT * january_seconds / january_month)  # 42,580.645... → .65
    assert january_rent == Decimal("42580.65")
    assert lines_of(january) == [
        ("node_rent", Decimal("1.419355"), RENT, january_rent)  # 2 x 22/31 node-months
    ]
    line = january.lines.get()
    assert line.unit == "node-month"
    assert "2 whole nodes x 30000 USD per node per month" in line.description
    assert "1,900,800 of its 2,678,400 s (prorated)" in line.description
    assert line.inputs["pieces"][0]["seconds"] == january_seconds

    # --- February (28 days): leased 02-01 to 02-20 = 19 days; one server down 60 hours.
    outage(node, at(2, 5), at(2, 7, 12))
    cycle(at(2, 20, 2))
    february = Invoice.objects.get(contract=contract, period_start=at(2, 1))
    february_rent = cents(2 * RENT * 19 * DAY / (28 * DAY))  # 40,714.2857... → .29
    assert february_rent == Decimal("40714.29")
    # Availability: 1 - (8 GPUs x 60 h) / (16 GPUs x 19 days x 24 h) = 93.42 % < 95 → 25 %.
    credit = cents(february_rent * Decimal("0.25"))  # 10,178.5725 → 10,178.57
    assert lines_of(february) == [
        ("node_rent", Decimal("1.357143"), RENT, february_rent),
        ("sla_credit", Decimal(1), -credit, -credit),
    ]
    assert february.total == february_rent - credit == Decimal("30535.72")
    sla_line = february.lines.get(kind="sla_credit")
    assert [e.kind for e in sla_line.events.all()] == [EventKind.SLA_CREDIT]
    assert "93.4211 %" in sla_line.description  # 93.42105...'s fourth place, half up

    # Nothing more to bill after the end; no card-hour line ever.
    cycle(at(3, 5))
    assert Invoice.objects.filter(contract=contract).count() == 2
    assert not Invoice.objects.filter(contract=contract, lines__kind="card_hours").exists()


def test_a_31_day_then_30_day_month(provider: Any, customer: Any) -> None:
    lease = rent_lease(provider, customer, nodes=1, start=at(3, 10), end=at(4, 20))
    cycle(at(4, 1, 2))
    cycle(at(4, 20, 2))
    march, april = Invoice.objects.filter(contract=lease.contract).order_by("period_start")
    # March: 22 of 31 days → 30,000 x 22/31 = 21,290.3225... ; April: 19 of 30 days → 19,000.
    assert march.lines.get().amount == cents(RENT * 22 / 31) == Decimal("21290.32")
    assert april.lines.get().amount == cents(RENT * 19 / 30) == Decimal("19000.00")
    assert april.lines.get().quantity == Decimal("0.633333")


def test_a_whole_month_is_exactly_the_rent_whatever_its_length(
    provider: Any, customer: Any
) -> None:
    lease = rent_lease(provider, customer, nodes=1, start=at(2, 1), end=at(5, 1))
    cycle(at(5, 1, 2))
    rents = [
        invoice.lines.get(kind="node_rent").amount
        for invoice in Invoice.objects.filter(contract=lease.contract).order_by("period_start")
    ]
    assert rents == [RENT, RENT, RENT]  # February 28 days, March 31, April 30
    february = Invoice.objects.get(contract=lease.contract, period_start=at(2, 1))
    assert "all of February 2027" in february.lines.get().description


def test_a_deposit_share_is_of_the_rent_over_the_term(provider: Any, customer: Any) -> None:
    """10 % of the contract's value, the rent over its term (3 x 30,000 = 90,000): 9,000.00,
    which the customer's prepaid balance must hold before the lease starts."""
    deposit = {"kind": "prepayment", "mode": "deposit", "share_pct": "10"}
    with pytest.raises(Conflict) as refused:
        rent_lease(provider, customer, nodes=1, start=at(2, 1), end=at(5, 1), extra=(deposit,))
    assert "a deposit of 9000.00 USD" in refused.value.message
    assert not Lease.objects.exists()


EXIT_PCT = {
    "kind": "exit_terms",
    "notice_days_lessee": 30,
    "notice_days_lessor": 90,
    "fee": "percent_of_remaining",
    "fee_pct": "20",
    "fee_free_triggers": [],
    "data_migration_days": 14,
    "data_migration_party": "lessor",
}


def test_leaving_a_rent_contract_early_costs_months_of_its_server_rent(
    client_for: Any, provider: Any, customer: Any
) -> None:
    """3 months of rent on 2 servers at 30,000 = 180,000.00 USD, not months of a GPU-hour rate
    (a rent contract's is 0), quoted through the API and charged by the exit."""
    lease = rent_lease(
        provider, customer, nodes=2, start=at(2, 1), end=at(12, 1), extra=(EXIT_TERMS,)
    )
    client = client_for(customer)
    with time_machine.travel(at(3, 1), tick=False):
        quote = client.post(
            f"/api/v1/contracts/{lease.contract_id}/termination-quote",
            {"exit_date": "2027-04-15"},
            format="json",
        )
        assert quote.status_code == 200, quote.json()
        assert quote.json()["fee"] == str(cents(3 * 2 * RENT)) == "180000.00"
        assert "3 x 2 whole nodes x 30000" in quote.json()["explanation"]
        exited = client.post(
            f"/api/v1/leases/{lease.pk}/exit", {"exit_date": "2027-04-15"}, format="json"
        )
        assert exited.status_code == 200, exited.json()
    fee = lease.contract.events.get(kind=EventKind.EXIT_FEE)
    assert (fee.amount, fee.currency) == (Decimal("180000.00"), "USD")


def test_a_rent_fee_never_exceeds_the_rent_still_owed_and_a_percent_is_of_that_rent(
    client_for: Any, provider: Any, customer: Any
) -> None:
    # Months of rent near the end: exit effective 2027-05-01 (30 days' notice from 2027-04-01),
    # term ends 2027-06-01: the rent still owed is 2 x 30,000 x 31/31 (May) = 60,000.00, below
    # 3 x 2 x 30,000 = 180,000.00, so the fee is capped there.
    capped = rent_lease(
        provider, customer, nodes=2, start=at(2, 1), end=at(6, 1), extra=(EXIT_TERMS,)
    )
    client = client_for(customer)
    with time_machine.travel(at(4, 1), tick=False):
        quote = client.post(
            f"/api/v1/contracts/{capped.contract_id}/termination-quote",
            {"exit_date": "2027-05-01"},
            format="json",
        ).json()
    assert quote["fee"] == "60000.00"
    assert "capped at the rent still owed" in quote["explanation"]
    # A percent: 20 % of the rent from 2027-05-01 to 2027-06-01 on one server = 0.2 x 30,000.
    percent = rent_lease(
        provider, customer, nodes=1, start=at(2, 1), end=at(6, 1), extra=(EXIT_PCT,)
    )
    with time_machine.travel(at(4, 1), tick=False):
        quote = client.post(
            f"/api/v1/contracts/{percent.contract_id}/termination-quote",
            {"exit_date": "2027-05-01"},
            format="json",
        ).json()
    assert quote["fee"] == str(cents(Decimal("0.2") * RENT)) == "6000.00"
