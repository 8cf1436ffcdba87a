"""The billing demo: three months that ended just before now, billed by the real jobs on seeding."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from itertools import pairwise
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection
from django.db.models import F, Sum
from django.utils import timezone

from accounts.models import Organization
from billing.demo import OFFER_NAME, simulated_months
from billing.models import (
    ISSUED_STATUSES,
    BillingRun,
    CommissionCharge,
    FundsAlert,
    FundsPolicy,
    Invoice,
    InvoiceLine,
    InvoiceStatus,
    LedgerTransaction,
    LineKind,
    Payout,
    ProviderStatement,
    TopUp,
    UsageBatch,
    UsageEvent,
    UsageRollup,
)
from contracts.choices import EventKind
from contracts.models import Contract, ContractEvent
from inventory.models import MarketPrice, Outage
from leasing.models import Lease

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def ledger_backfill_output() -> str:
    out = io.StringIO()
    call_command("ledger_backfill", stdout=out)
    return out.getvalue()


def demo_contracts() -> tuple[Contract, Contract, Contract]:
    """The 8-GPU block, the 4-GPU block that exits early, and the token-SLA contract."""
    leases = Lease.objects.filter(offer__name=OFFER_NAME).select_related("contract")
    block = leases.get(gpu_count=8).contract
    exiting = leases.get(gpu_count=4).contract
    tokens = Contract.objects.get(lessee__slug="demo-customer", pricing_basis="token_sla")
    return block, exiting, tokens


def finalized(contract: Contract) -> list[Invoice]:
    """The contract's issued invoices (the first month's are paid by now)."""
    return list(
        Invoice.objects.filter(
            contract=contract, status__in=[InvoiceStatus.FINALIZED, InvoiceStatus.PAID]
        ).order_by("period_start")
    )


def event_kinds(line: InvoiceLine) -> list[str]:
    return [event.kind for event in line.events.all()]


def billed_tokens(invoice: Invoice, kind: str) -> int:
    return int(invoice.lines.get(kind=kind).inputs["tokens"])


def token_line_sums(**filters: Any) -> dict[str, int]:
    """The tokens each token line kind bills, from the successful events (the demo offering
    prices cache hits and has a batch tier, so every kind stands apart)."""
    success = UsageEvent.objects.filter(status="success", **filters)
    online, batch = success.filter(mode="online"), success.filter(mode="batch")
    uncached = Sum(F("input_tokens") - F("cached_input_tokens"))
    return {
        "input_tokens": online.aggregate(n=uncached)["n"] or 0,
        "cached_input_tokens": success.aggregate(n=Sum("cached_input_tokens"))["n"] or 0,
        "output_tokens": online.aggregate(n=Sum("output_tokens"))["n"] or 0,
        "batch_input_tokens": batch.aggregate(n=uncached)["n"] or 0,
        "batch_output_tokens": batch.aggregate(n=Sum("output_tokens"))["n"] or 0,
    }


def token_sums(**filters: Any) -> tuple[int, int]:
    totals = UsageEvent.objects.filter(**filters).aggregate(
        input=Sum("input_tokens"), output=Sum("output_tokens")
    )
    return totals["input"] or 0, totals["output"] or 0


def snapshot() -> tuple[int, ...]:
    return tuple(
        model.objects.count()
        for model in (
            Invoice,
            InvoiceLine,
            UsageBatch,
            UsageEvent,
            UsageRollup,
            BillingRun,
            Contract,
            ContractEvent,
            Lease,
            Outage,
            MarketPrice,
        )
    )


def test_three_months_are_billed_on_seeding_and_seeding_again_changes_nothing(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        text = seed()
    block, exiting, tokens = demo_contracts()
    months = simulated_months(timezone.now())

    # Every demo contract has at least three issued invoices, all for periods over before now.
    invoices = {contract: finalized(contract) for contract in (block, exiting, tokens)}
    assert [len(issued) for issued in invoices.values()] == [4, 3, 3]
    every = [invoice for issued in invoices.values() for invoice in issued]
    assert all(invoice.period_end <= months[-1][1] < timezone.now() for invoice in every)
    assert all(
        invoice.total == sum(line.amount for line in invoice.lines.all()) + invoice.tax
        for invoice in every
    )
    assert all(str(invoice.number) in text for invoice in every)
    assert "billing:" in text and "10 invoices" in text

    # Every contract's history starts with its creation, dated when the demo drafted it.
    for contract in (block, exiting, tokens):
        history = ContractEvent.objects.filter(contract=contract)
        created = history.get(kind=EventKind.CREATED).effective_at
        assert created == min(event.effective_at for event in history)
        assert created < timezone.now() - timedelta(days=20)

    # The block's node went down in the first month: an SLA credit from a recorded decision.
    first_month = invoices[block][1]
    assert first_month.period_start == months[0][0]
    credit = first_month.lines.get(kind=LineKind.SLA_CREDIT)
    assert credit.amount < 0
    assert event_kinds(credit) == [EventKind.SLA_CREDIT]

    # The market price cut of the second month steps the rate 15 % down from the third.
    base = block.base_rate_per_gpu_hour
    assert base is not None
    stepped = InvoiceLine.objects.get(
        invoice__contract=block, kind=LineKind.CARD_HOURS, events__kind=EventKind.PRICE_STEP
    )
    assert stepped.invoice.period_start == months[2][0]
    assert stepped.unit_price == (base * Decimal("0.85")).quantize(Decimal("0.000001"))
    assert all(
        line.unit_price == base
        for line in InvoiceLine.objects.filter(invoice__in=invoices[block][:3])
        if line.kind == LineKind.CARD_HOURS
    )

    # The 4-GPU block left early: its last invoice ends at the exit and carries the fee.
    exiting.refresh_from_db()
    assert exiting.status == "ended" and exiting.end_reason == "exited"
    last = invoices[exiting][-1]
    assert last.period_end == exiting.ended_at
    fee = last.lines.get(kind=LineKind.EXIT_FEE)
    assert fee.amount > 0
    assert event_kinds(fee) == [EventKind.EXIT_FEE]
    assert Lease.objects.get(contract=exiting).status == "ended"

    # Tokens: only successful, on-time requests of the period are billed on its invoice...
    for invoice in invoices[tokens]:
        period = {
            "contract": tokens,
            "occurred_at__gte": invoice.period_start,
            "occurred_at__lt": invoice.period_end,
        }
        billed = token_line_sums(is_late=False, **period)
        assert {kind: billed_tokens(invoice, kind) for kind in billed} == billed
        assert all(billed.values())  # cache hits and batch requests are billed apart
        on_time = token_sums(status="success", is_late=False, **period)[0]
        assert token_sums(**period)[0] > on_time  # failed and late ones were reported too
    assert UsageEvent.objects.filter(contract=tokens, status="timeout").exists()
    assert UsageEvent.objects.filter(contract=tokens, status="error").exists()
    assert UsageEvent.objects.filter(contract=tokens, status="rejected").exists()
    # ...and usage that arrived after its month was billed is billed on the next invoice.
    first_tokens, second_tokens, _ = invoices[tokens]
    late = token_line_sums(contract=tokens, is_late=True)
    assert late["input_tokens"] > 0
    assert not first_tokens.lines.filter(kind__startswith="late_").exists()
    assert {
        kind: billed_tokens(second_tokens, f"late_{kind}") for kind, count in late.items() if count
    } == {kind: count for kind, count in late.items() if count}
    # The second month's incident cost the provider an SLA credit on the token contract too.
    assert second_tokens.lines.filter(kind=LineKind.SLA_CREDIT).exists()
    assert not first_tokens.lines.filter(kind=LineKind.SLA_CREDIT).exists()
    assert UsageRollup.objects.filter(contract=tokens).count() > 24 * 80

    # Each issued invoice is handed to the worker for delivery once the seed commits.
    queued = sorted(
        callback.keywords["args"][0]
        for callback in callbacks
        if isinstance(callback, partial) and callback.args[:1] == ("billing.deliver_invoice",)
    )
    assert queued == sorted(invoice.pk for invoice in every)

    # Each issued invoice was posted to the ledger as it was issued, and the ledger reconciles.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the balance check of commit time
    assert sorted(
        LedgerTransaction.objects.filter(kind="invoice_issued").values_list("invoice", flat=True)
    ) == sorted(invoice.pk for invoice in every)
    reconciled = io.StringIO()
    call_command("ledger_reconcile", stdout=reconciled)  # exits 1 on any difference
    assert "ledger = documents" in reconciled.getvalue()
    assert "0 transactions posted" in ledger_backfill_output()

    # The marketplace took its commission on each invoice; the first month's invoices were paid,
    # and the payout run stated the last month and paid the provider out by export file.
    assert CommissionCharge.objects.filter(invoice__in=every, amount__gt=0).count() == len(every)
    statement = ProviderStatement.objects.get(provider__slug="demo-provider")
    assert statement.period_start == months[-1][0]
    payout = Payout.objects.get(statement=statement)
    assert (payout.status, payout.method, payout.amount) == (
        "submitted",
        "export",
        statement.payable,
    )
    paid = Invoice.objects.filter(status=InvoiceStatus.PAID, contract__in=invoices)
    collected = sum(
        (invoice.subtotal - invoice.commission_charges.get().amount for invoice in paid),
        Decimal(0),
    )
    assert paid.count() >= 3 and statement.payable == collected
    assert "statement:" in text and f"payout {payout.pk} submitted (export)" in text
    # The prepaid balance: the promotional card-hour credit was drawn down by a second-month
    # card-hour invoice, the top-up is on the balance, and the burn-down has a date.
    draw = InvoiceLine.objects.get(kind=LineKind.BALANCE_DRAW)
    assert draw.amount == Decimal("-500.00")
    assert draw.invoice.period_start == months[1][0]  # granted two days before it was billed
    assert draw.invoice.contract in (block, exiting)
    assert TopUp.objects.get(customer__slug="demo-customer").status == "succeeded"
    assert "funds:" in text and "runs out on" in text
    policy = FundsPolicy.objects.get(contract=block)
    assert policy.days_left is not None and policy.evaluated_at is not None
    assert FundsAlert.objects.filter(policy=policy).exists() == (policy.days_left <= 60)

    before = snapshot()
    again = seed()
    assert "billing:            already seeded" in again
    assert snapshot() == before


def month(year: int, number: int) -> datetime:
    return datetime(year, number, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (datetime(2026, 12, 2, 20, 0, tzinfo=UTC), [(2026, 9), (2026, 10), (2026, 11), (2026, 12)]),
        # The cycle of the month that just ended has not run yet: that month is left out.
        (datetime(2027, 3, 1, 1, 30, tzinfo=UTC), [(2026, 11), (2026, 12), (2027, 1), (2027, 2)]),
        (datetime(2027, 3, 1, 3, 30, tzinfo=UTC), [(2026, 12), (2027, 1), (2027, 2), (2027, 3)]),
    ],
)
def test_the_simulated_months_are_the_last_whole_months_billed_by_now(
    now: datetime, expected: list[tuple[int, int]]
) -> None:
    bounds = [month(*bound) for bound in expected]
    assert simulated_months(now) == list(pairwise(bounds))


@pytest.mark.parametrize(
    ("now", "first"),
    [
        # Across a year end, and further back than the demo market index reaches (quotes added).
        (datetime(2027, 1, 31, 12, 0, tzinfo=UTC), month(2026, 10)),
        # February in the middle: the incident, the price cut and the notice fall in it.
        (datetime(2027, 4, 1, 5, 0, tzinfo=UTC), month(2027, 1)),
    ],
)
def test_the_demo_bills_whatever_day_it_is_seeded(now: datetime, first: datetime) -> None:
    with time_machine.travel(now):
        seed()
    block, exiting, tokens = demo_contracts()
    assert [len(finalized(contract)) for contract in (block, exiting, tokens)] == [4, 3, 3]
    assert finalized(tokens)[0].period_start == first
    lines = InvoiceLine.objects.filter(invoice__contract__in=[block, exiting, tokens])
    assert lines.filter(kind=LineKind.SLA_CREDIT).count() == 2
    assert lines.filter(kind=LineKind.EXIT_FEE).count() == 1
    assert lines.filter(events__kind=EventKind.PRICE_STEP).count() == 2
    years = set(Invoice.objects.values_list("sequence_year", flat=True))
    assert years == {first.year, now.year}


def test_a_cost_report_over_a_demo_month_sums_to_its_invoices_and_shows_batch_and_cache(
    client_for: Any,
) -> None:
    seed()
    customer = Organization.objects.get(slug="demo-customer")
    client = client_for(customer)
    _, _, tokens = demo_contracts()
    first = finalized(tokens)[0]
    # The token invoice bills batch and cached tokens on lines of their own, with their reasons.
    lines = {line.kind: line for line in first.lines.all()}
    assert "prompt cache" in lines["cached_input_tokens"].description
    assert "batch tier: requests completed within 24 h" in lines["batch_input_tokens"].description
    month = f"{first.period_start:%Y-%m}"
    month_invoices = list(
        Invoice.objects.filter(
            customer=customer,
            status__in=ISSUED_STATUSES,
            period_start__year=first.period_start.year,
            period_start__month=first.period_start.month,
        )
    )
    assert len(month_invoices) >= 2  # the token contract's and the leases'
    for group_by in ("tag:team", "tag:project", "contract", "model", "mode"):
        response = client.get("/api/v1/cost-reports/", {"group_by": group_by, "period": month})
        assert response.status_code == 200, response.content
        body = response.json()
        assert sum(Decimal(row["total"]) for row in body["rows"]) == sum(
            invoice.total for invoice in month_invoices
        ), group_by
        assert {row["number"] for row in body["invoices"]} == {i.number for i in month_invoices}
    teams = client.get("/api/v1/cost-reports/", {"group_by": "tag:team", "period": month}).json()
    assert {row["group"] for row in teams["rows"]} >= {"research", "search", "ads"}
