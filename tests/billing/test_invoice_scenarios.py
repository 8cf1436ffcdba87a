"""Time-travel scenarios: a card-hour lease walked through four months of billing, to the cent.

The clock moves with time-machine; every step goes through the services users and jobs
trigger (lease, acceptance run, outage, price step, exit, billing cycle). Each expected amount
is worked out in the test from the contract and the usage.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from billing.models import Invoice, InvoiceStatus
from billing.services.cycle import billing_cycle_run
from contracts.choices import EventKind
from contracts.models import ContractEvent
from contracts.services import contracts_end_due
from inventory.models import GpuModel
from leasing.models import Lease
from leasing.services.changes import lease_exit
from tests.clock import clock_of
from tests.contracts.factories import ACCEPTANCE_TOKENS, SLA_LADDER, STEP_ON_B200_GA
from tests.leasing.factories import EXIT_TERMS, outage
from tests.scenarios import lease_h200

at = clock_of(2027)


def cents(value: str | Decimal) -> Decimal:
    return Decimal(value).quantize(Decimal("0.01"))


def lines_of(invoice: Invoice) -> list[tuple[str, Decimal, Decimal, Decimal]]:
    return [
        (line.kind, line.quantity, line.unit_price, line.amount)
        for line in invoice.lines.order_by("position")
    ]


def cycle(when: datetime) -> None:
    with time_machine.travel(when, tick=False):
        billing_cycle_run(now=when, deliver=False)


@pytest.fixture
def leased(provider: Any, customer: Any) -> Lease:
    """8 x H200 at 2.40 USD from 2027-01-10 to 2027-07-01, acceptance passed 2027-01-11 12:00."""
    GpuModel.objects.filter(slug="b200").update(ga_date=date(2027, 2, 20))
    return lease_h200(
        provider,
        customer,
        year=2027,
        template=[EXIT_TERMS, ACCEPTANCE_TOKENS, SLA_LADDER, STEP_ON_B200_GA],
    )


@pytest.mark.django_db
def test_four_months_of_a_card_hour_lease_bill_to_the_cent(leased: Lease, provider: Any) -> None:
    contract = leased.contract
    node = Lease.objects.get(pk=leased.pk).allocations.first().node  # type: ignore[union-attr]
    rate = Decimal("2.40")

    # --- January: billing starts at the passing run, 2027-01-11 12:00; 8 GPUs until 02-01.
    cycle(at(2, 1, 0) + timedelta(minutes=30))  # inside the grace hour: a draft only
    january = Invoice.objects.get(contract=contract, period_start=at(1, 10))
    assert january.status == InvoiceStatus.DRAFT and january.number is None
    cycle(at(2, 1, 2))
    january.refresh_from_db()
    january_hours = Decimal(8 * (20 * 24 + 12))  # 20.5 days x 8 GPUs = 3,936 GPU-hours
    assert lines_of(january) == [("card_hours", january_hours, rate, cents(january_hours * rate))]
    assert january.total == cents("9446.40")
    assert january.status == InvoiceStatus.FINALIZED
    assert january.number == f"INV-{provider.slug.upper()}-2027-000001"

    # --- February: the node is down 60 hours; availability 91.07 % earns the 25 % rung.
    outage(node, at(2, 10), at(2, 12, 12))
    cycle(at(3, 1, 2))
    february = Invoice.objects.get(contract=contract, period_start=at(2, 1))
    allocated = Decimal(8 * 28 * 24)  # 5,376 GPU-hours allocated
    down = Decimal(8 * 60)  # 480 GPU-hours lost to the outage
    usage = cents((allocated - down) * rate)  # 4,896 x 2.40 = 11,750.40
    credit = cents(usage * Decimal("0.25"))  # 2,937.60
    assert lines_of(february) == [
        ("card_hours", allocated - down, rate, usage),
        ("sla_credit", Decimal(1), -credit, -credit),
    ]
    assert february.total == usage - credit == cents("8812.80")
    sla_line = february.lines.get(kind="sla_credit")
    assert [e.kind for e in sla_line.events.all()] == [EventKind.SLA_CREDIT]
    assert "91.0714 %" in sla_line.description

    # --- March: B200 reached GA on 02-20, so the rent steps 15 % down from 03-01 (2.04).
    # The customer gives notice on 03-15 to leave on 04-15 (30 days' notice).
    with time_machine.travel(at(3, 15), tick=False):
        lease_exit(lease=leased, party="lessee", exit_date=date(2027, 4, 15), actor="customer")
    cycle(at(4, 1, 2))
    march = Invoice.objects.get(contract=contract, period_start=at(3, 1))
    stepped = Decimal("2.04")
    march_hours = Decimal(8 * 31 * 24)  # 5,952 GPU-hours
    assert lines_of(march) == [("card_hours", march_hours, stepped, cents(march_hours * stepped))]
    step_event = ContractEvent.objects.get(contract=contract, kind=EventKind.PRICE_STEP)
    assert list(march.lines.get().events.all()) == [step_event]
    assert march.total == cents("12142.08")

    # --- April: service to 04-15, then the exit fee: 3 months of rent at the stepped rate
    # (8 GPUs x 730 hours x 3 x 2.04), capped at the rent left in the term (04-15 to 07-01).
    with time_machine.travel(at(4, 15, 1), tick=False):
        contracts_end_due(now=at(4, 15, 1))
    cycle(at(4, 15, 2))
    april = Invoice.objects.get(contract=contract, period_start=at(4, 1))
    april_hours = Decimal(8 * 14 * 24)  # 2,688 GPU-hours
    fee_event = ContractEvent.objects.get(contract=contract, kind=EventKind.EXIT_FEE)
    months_of_rent = cents(Decimal(8 * 730 * 3) * stepped)  # 35,740.80
    rest_of_term = cents(Decimal(8 * 77 * 24) * stepped)  # 30,159.36
    fee = min(months_of_rent, rest_of_term)
    assert fee_event.amount == fee
    assert lines_of(april) == [
        ("card_hours", april_hours, stepped, cents(april_hours * stepped)),
        ("exit_fee", Decimal(1), fee, fee),
    ]
    assert april.total == cents(april_hours * stepped) + fee
    assert list(april.lines.get(kind="exit_fee").events.all()) == [fee_event]

    # Four invoices, numbered 1..4 without a gap, and nothing more to bill.
    invoices = Invoice.objects.filter(contract=contract).order_by("period_start")
    assert [i.sequence_number for i in invoices] == [1, 2, 3, 4]
    assert all(i.total == sum(line.amount for line in i.lines.all()) + i.tax for i in invoices)
    cycle(at(6, 1))
    assert Invoice.objects.filter(contract=contract).count() == 4


@pytest.mark.django_db
def test_a_finalized_invoice_does_not_change_when_facts_change_later(leased: Lease) -> None:
    cycle(at(2, 1, 2))
    january = Invoice.objects.get(contract=leased.contract, period_start=at(1, 10))
    before = (january.total, lines_of(january))
    node = leased.allocations.first().node  # type: ignore[union-attr]
    outage(node, at(1, 20), at(1, 21))  # reported late, after the invoice was issued
    cycle(at(2, 2))
    january.refresh_from_db()
    assert (january.total, lines_of(january)) == before
