"""The nightly economics job over real leases, invoices, outages, credit notes and FX rates."""

from __future__ import annotations

from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from django_celery_beat.models import PeriodicTask

from billing.models import Invoice
from billing.services.documents import credit_note_issue
from config.celery import app
from economics.models import AssetMonth, AssetPayback, EconomicsRun, FxRate
from economics.services.assets import asset_economics_refresh
from economics.services.runs import economics_run
from economics.tasks import refresh
from inventory.models import Node
from tests.economics.factories import at, bill_until, lease_node, offer_on
from tests.economics.factories import worked_example_node as server
from tests.leasing.factories import outage

RATE = Decimal("2.40")


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def month_of(node: Node, month: int) -> AssetMonth:
    return AssetMonth.objects.get(node=node, month=date(2027, month, 1))


@pytest.fixture
def leased_server(provider: Any, customer: Any) -> Node:
    """The server leased whole from 2027-01-10 to 2027-07-01, accepted at the start."""
    node = server(provider)
    lease_node(offer_on(node), customer, start=at(1, 10), end=at(7, 1))
    return node


@pytest.mark.django_db
def test_a_leased_month_is_explained_from_allocations_invoice_and_energy(
    leased_server: Node,
) -> None:
    bill_until(at(2, 1, 2))
    economics_run(now=at(2, 1, 3))

    january = month_of(leased_server, 1)
    hours = Decimal(31 * 24)  # 744
    allocated = Decimal(8 * 22 * 24)  # 01-10 to 02-01: 4,224 GPU-hours
    revenue = cents(allocated * RATE)  # billed from acceptance at the start: 10,137.60
    utilization = (allocated / (8 * hours)).quantize(Decimal("0.000001"))  # 0.709677
    energy = cents(Decimal("10.2") * hours * Decimal("1.3") * Decimal("0.08"))  # 789.24
    assert january.in_service_hours == hours
    assert january.available_gpu_hours == 8 * hours
    assert january.allocated_gpu_hours == allocated
    assert january.utilization == utilization
    assert january.revenue == revenue == Decimal("10137.60")
    assert january.energy_cost == energy == Decimal("789.24")
    assert january.opex == 0
    assert january.depreciation == Decimal("4166.67")  # 300,000 / 72
    assert january.net_cash_flow == revenue - energy
    assert january.book_value == Decimal("300000") - Decimal("4166.67")
    invoice = Invoice.objects.get(contract__lease__offer__nodes=leased_server)
    assert january.revenue_detail["documents"] == [invoice.number]
    assert january.revenue_detail["by_kind"] == {"card_hours": "10137.60"}
    # February is running: three hours of it, nothing billed yet.
    february = month_of(leased_server, 2)
    assert february.in_service_hours == 3 and february.revenue == 0


@pytest.mark.django_db
def test_an_outage_leaves_available_and_allocated_hours_and_the_sla_credit_reduces_revenue(
    leased_server: Node,
) -> None:
    outage(leased_server, at(2, 10), at(2, 12, 12))  # 60 hours, the whole node
    bill_until(at(2, 1, 2))
    bill_until(at(3, 1, 2))
    asset_economics_refresh(now=at(3, 1, 3))

    february = month_of(leased_server, 2)
    down = Decimal(8 * 60)
    assert february.available_gpu_hours == Decimal(8 * 28 * 24) - down  # 4,896
    assert february.allocated_gpu_hours == Decimal(8 * 28 * 24) - down
    assert february.utilization == 1
    invoice = Invoice.objects.get(period_start=at(2, 1))
    assert february.revenue == invoice.subtotal  # usage less the SLA credit
    assert set(february.revenue_detail["by_kind"]) == {"card_hours", "sla_credit"}
    assert Decimal(february.revenue_detail["by_kind"]["sla_credit"]) < 0


@pytest.mark.django_db
def test_a_credit_note_takes_its_amount_off_the_month_it_credits(leased_server: Node) -> None:
    bill_until(at(2, 1, 2))
    invoice = Invoice.objects.get(period_start=at(1, 10))
    credit_note_issue(
        invoice=invoice, reason="goodwill", actor="operator", amount=Decimal("137.60")
    )
    asset_economics_refresh(now=at(2, 1, 3))

    january = month_of(leased_server, 1)
    assert january.revenue == invoice.subtotal - Decimal("137.60") == Decimal("10000.00")
    assert january.revenue_detail["by_kind"]["credit_note"] == "-137.60"


@pytest.mark.django_db
def test_revenue_in_another_currency_is_converted_with_the_recorded_rate_and_shown(
    provider: Any, customer: Any
) -> None:
    node = server(provider, currency="EUR")
    lease_node(offer_on(node), customer, start=at(1, 10), end=at(7, 1))
    FxRate.objects.create(
        base_currency="USD",
        quote_currency="EUR",
        rate=Decimal("0.9"),
        valid_on=date(2027, 1, 1),
        source="ECB reference rate",
    )
    bill_until(at(2, 1, 2))
    asset_economics_refresh(now=at(2, 1, 3))

    january = month_of(node, 1)
    usd = Decimal("10137.60")
    assert january.currency == "EUR"
    assert january.revenue == cents(usd * Decimal("0.9")) == Decimal("9123.84")
    # Power is priced in USD too: 789.2352 USD at 0.9.
    assert january.energy_cost == cents(
        Decimal("10.2") * 744 * Decimal("1.3") * Decimal("0.08") * Decimal("0.9")
    )
    [revenue_conversion] = [
        c for c in january.revenue_detail["conversions"] if c["what"] == "revenue"
    ]
    assert revenue_conversion == {
        "what": "revenue",
        "amount": "10137.6000",
        "from": "USD",
        "to": "EUR",
        "rate": "0.9000000000",
        "rate_valid_on": "2027-01-01",
        "inverted": False,
        "converted": "9123.84000000000000",
    }
    assert january.warnings == []


@pytest.mark.django_db
def test_a_missing_fx_rate_is_a_warning_on_the_month_not_a_silent_zero(
    provider: Any, customer: Any
) -> None:
    node = server(provider, currency="EUR")
    lease_node(offer_on(node), customer, start=at(1, 10), end=at(7, 1))
    bill_until(at(2, 1, 2))
    asset_economics_refresh(now=at(2, 1, 3))

    january = month_of(node, 1)
    assert january.revenue == 0
    assert any("10137.6000 USD of revenue not converted to EUR" in w for w in january.warnings)
    assert any("power_price" in w for w in january.warnings)


@pytest.mark.django_db
def test_the_job_is_idempotent_and_replaces_its_rows(leased_server: Node) -> None:
    bill_until(at(2, 1, 2))
    economics_run(now=at(2, 1, 3))
    first = list(AssetMonth.objects.values_list("node_id", "month", "revenue", "net_cash_flow"))
    economics_run(now=at(2, 1, 3))
    again = list(AssetMonth.objects.values_list("node_id", "month", "revenue", "net_cash_flow"))
    assert first == again
    assert AssetMonth.objects.filter(node=leased_server).count() == 2
    assert AssetPayback.objects.filter(node=leased_server).count() == 1
    assert EconomicsRun.objects.count() == 2


@pytest.mark.django_db
def test_payback_summary_projects_from_the_trailing_months(leased_server: Node) -> None:
    for month in (2, 3, 4):
        bill_until(at(month, 1, 2))
    asset_economics_refresh(now=at(4, 1, 3))

    payback = AssetPayback.objects.get(node=leased_server)
    months = list(AssetMonth.objects.filter(node=leased_server).order_by("month"))
    cumulative = sum((m.net_cash_flow for m in months), Decimal(0))
    trailing = months[:3]  # the three whole months; April has run for three hours only
    average = sum((m.net_cash_flow for m in trailing), Decimal(0)) / 3
    assert payback.months_of_life == 4
    assert payback.cumulative_net_cash_flow == cumulative
    assert payback.paid_back_in_month is None
    assert payback.projected_payback_months == (
        4 + (Decimal("300000") - cumulative) / average
    ).quantize(Decimal("0.01"))
    assert payback.book_value == Decimal("300000") - sum(m.depreciation for m in months)
    assert payback.roi_to_date == ((cumulative - 300000) / 300000).quantize(Decimal("0.000001"))


@pytest.mark.django_db
def test_a_node_without_data_gets_empty_revenue_and_no_utilization_errors(provider: Any) -> None:
    node = server(provider, acquired_on=date(2027, 1, 15))
    outage(node, at(1, 15), at(2, 1))  # down for its whole first month
    asset_economics_refresh(now=at(2, 1))

    [january] = AssetMonth.objects.filter(node=node)
    assert january.in_service_hours == 17 * 24
    assert january.available_gpu_hours == 0
    assert january.utilization is None
    payback = AssetPayback.objects.get(node=node)
    assert payback.revenue_per_gpu_hour is None
    assert payback.revenue_per_gpu_hour_reason == "no_allocated_gpu_hours"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_nightly_task_runs_on_a_real_worker_and_is_scheduled(
    celery_worker_process: None, provider: Any
) -> None:
    node = server(provider, acquired_on=date(2027, 1, 1))
    run_id = refresh.delay(as_of=at(3, 1, 2).isoformat()).get(timeout=60)

    run = EconomicsRun.objects.get(pk=run_id)
    assert (run.nodes, run.months) == (Node.objects.count(), AssetMonth.objects.count())
    assert AssetMonth.objects.filter(node=node).count() == 3  # January, February, 2 h of March
    assert AssetPayback.objects.get(node=node).months_of_life == 3
    nightly = PeriodicTask.objects.get(task="economics.refresh")
    assert (nightly.crontab.hour, nightly.crontab.minute, nightly.queue) == ("2", "30", "billing")


def test_the_nightly_task_goes_to_the_billing_queue_whether_sent_by_object_or_by_name() -> None:
    """Beat and other processes may send it by name only: the route agrees with the task."""
    assert (refresh.name, refresh.queue) == ("economics.refresh", "billing")
    assert app.amqp.router.route({}, "economics.refresh", (), {})["queue"].name == "billing"
