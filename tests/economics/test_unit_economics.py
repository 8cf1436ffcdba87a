"""Unit economics of an SLA offering and of a pool, and the capacity signals of pools."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
import time_machine

from billing.services.ingest import usage_batch_ingest
from billing.services.rollups import usage_rollups_refresh
from core.errors import NotFound, ValidationFailed
from economics.models import AssetMonth, CapacitySignal, SignalLevel
from economics.selectors.unit_economics import unit_economics
from economics.services.assets import asset_economics_refresh
from economics.services.runs import economics_run
from economics.services.signals import capacity_signals_evaluate
from inventory.models import GpuModel, Node
from leasing.models import QuoteShortfall, SlaOffering
from leasing.services.offers import sla_subscription_create
from tests.billing.factories import event, token_contract
from tests.economics.factories import at, bill_until, lease_node, offer_on
from tests.economics.factories import worked_example_node as server
from tests.leasing.factories import make_sla_offering

FEB = datetime(2027, 2, 1, tzinfo=UTC)


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


@pytest.fixture
def serving(provider: Any, customer: Any) -> tuple[SlaOffering, Node]:
    """An SLA offering served by the worked-example server, with one subscribed contract that
    sent 100 requests on 2027-01-10 09:00-10:00: 95 served, 3 timed out, 2 errors."""
    node = server(provider)
    offering = make_sla_offering(provider, committed_tokens_per_s=100)
    offering.nodes.add(node)
    contract = token_contract(
        provider,
        customer,
        term_start=datetime(2027, 1, 1, tzinfo=UTC),
        term_end=datetime(2028, 1, 1, tzinfo=UTC),
    )
    sla_subscription_create(offering=offering, contract=contract)
    start = at(1, 10, 9)
    batch = [
        event(f"ok-{i}", contract, start + timedelta(seconds=30 * i), ttft_ms=100.0 + i)
        for i in range(95)
    ]
    batch += [
        event(f"to-{i}", contract, start + timedelta(seconds=30 * i + 5), status="timeout")
        for i in range(3)
    ]
    batch += [
        event(f"err-{i}", contract, start + timedelta(seconds=30 * i + 7), status="error")
        for i in range(2)
    ]
    with time_machine.travel(at(1, 10, 11), tick=False):
        outcome = usage_batch_ingest(provider=provider, raw_events=batch, now=at(1, 10, 11))
        assert outcome.accepted == 100
        usage_rollups_refresh(now=at(1, 10, 11))
    asset_economics_refresh(now=FEB)
    return offering, node


@pytest.mark.django_db
def test_an_offering_month_costs_its_servers_tco_divided_by_successful_requests(
    serving: tuple[SlaOffering, Node], provider: Any
) -> None:
    offering, node = serving
    [january] = unit_economics(
        caller_org=provider,
        offering_id=offering.pk,
        pool=None,
        period="month",
        start=date(2027, 1, 1),
        end=date(2027, 1, 31),
        now=FEB,
    )
    month = AssetMonth.objects.get(node=node, month=date(2027, 1, 1))
    tco = month.depreciation + month.energy_cost + month.opex  # 4,166.67 + 789.24 + 0
    assert january.total_cost == tco == Decimal("4955.91")
    costs = january.costs
    assert (costs.requests_total, costs.requests_successful) == (100, 95)
    assert costs.tokens_successful == 95 * 1250
    assert costs.cost_per_successful_request.value == (tco / 95).quantize(Decimal("0.000001"))
    assert costs.cost_per_million_successful_tokens.value == (
        tco * 1_000_000 / (95 * 1250)
    ).quantize(Decimal("0.000001"))
    # 5 of 100 requests failed: 5 % of the cost was burnt on them.
    assert costs.failed_request_share.value == Decimal("0.050000")
    assert costs.cost_of_failed_requests == cents(tco * Decimal("0.05"))
    assert january.gpu_hours_by_workload == {"inference": Decimal("0.0000")}

    [hour] = january.hourly
    assert hour.hour == at(1, 10, 9)
    assert (hour.requests_total, hour.requests_successful) == (100, 95)
    # Throughput against the commitment: 118,750 tokens in the hour / (100 tokens/s x 3,600 s).
    assert hour.utilization == (Decimal(95 * 1250) / 360_000).quantize(Decimal("0.000001"))
    assert january.utilization_peak == hour.utilization
    # ttft of the served requests is 100..194 ms: the exact percentiles of those values.
    assert hour.ttft_p95_ms == pytest.approx(100 + 0.95 * 94)
    assert hour.ttft_p99_ms == pytest.approx(100 + 0.99 * 94)
    assert hour.e2e_p95_ms == pytest.approx(900.0)
    body = january.as_json()
    assert body["cost_per_successful_request"]["reason"] is None
    assert body["hourly"][0]["ttft_p95_ms"] == pytest.approx(189.3)


@pytest.mark.django_db
def test_weeks_without_traffic_answer_null_costs_with_reasons(
    serving: tuple[SlaOffering, Node], provider: Any
) -> None:
    offering, _ = serving
    weeks = unit_economics(
        caller_org=provider,
        offering_id=offering.pk,
        pool=None,
        period="week",
        start=date(2027, 1, 11),
        end=date(2027, 1, 24),
        now=FEB,
    )
    assert [(w.start, w.end) for w in weeks] == [
        (date(2027, 1, 11), date(2027, 1, 18)),
        (date(2027, 1, 18), date(2027, 1, 25)),
    ]
    for week in weeks:
        assert week.total_cost > 0
        assert week.costs.cost_per_successful_request.value is None
        assert week.costs.cost_per_successful_request.reason == "no_successful_requests"
        assert week.hourly == []


@pytest.mark.django_db
def test_a_pool_splits_gpu_hours_by_workload_and_shows_peak_utilization(
    provider: Any, customer: Any
) -> None:
    node = server(provider)
    offer = offer_on(node)
    lease_node(offer, customer, start=at(1, 10), end=at(1, 20), gpus=4)
    asset_economics_refresh(now=FEB)

    [january] = unit_economics(
        caller_org=provider,
        offering_id=None,
        pool=(node.site_id, node.gpu_model.slug),
        period="month",
        start=date(2027, 1, 1),
        end=date(2027, 1, 31),
        now=FEB,
    )
    allocated = Decimal(4 * 10 * 24)  # 4 GPUs for 10 days
    assert january.allocated_gpu_hours == allocated
    assert january.available_gpu_hours == Decimal(8 * 31 * 24)
    assert january.utilization_avg.value == (allocated / (8 * 31 * 24)).quantize(
        Decimal("0.000001")
    )
    assert january.utilization_peak == Decimal("0.500000")  # 4 of 8 GPUs in the busy hours
    assert january.gpu_hours_by_workload == {"unspecified": allocated}
    assert january.costs.cost_per_successful_request.reason == "no_successful_requests"


@pytest.mark.django_db
def test_bad_scopes_and_ranges_get_clear_codes(provider: Any, other_provider: Any) -> None:
    node = server(provider)
    offering = make_sla_offering(provider)
    common: dict[str, Any] = {"start": None, "end": None, "now": FEB, "period": "month"}
    with pytest.raises(ValidationFailed) as both:
        unit_economics(caller_org=provider, offering_id=offering.pk, pool=(1, "x"), **common)
    assert both.value.code == "scope_required"
    with pytest.raises(ValidationFailed) as period:
        unit_economics(
            caller_org=provider, offering_id=offering.pk, pool=None, **common | {"period": "year"}
        )
    assert period.value.code == "invalid_period"
    with pytest.raises(ValidationFailed) as backwards:
        unit_economics(
            caller_org=provider,
            offering_id=offering.pk,
            pool=None,
            **common | {"start": date(2027, 2, 1), "end": date(2027, 1, 1)},
        )
    assert backwards.value.code == "invalid_range"
    with pytest.raises(NotFound) as foreign:
        unit_economics(caller_org=other_provider, offering_id=offering.pk, pool=None, **common)
    assert foreign.value.code == "offering_not_found"
    with pytest.raises(NotFound) as foreign_pool:
        unit_economics(
            caller_org=other_provider, offering_id=None, pool=(node.site_id, "h200-sxm"), **common
        )
    assert foreign_pool.value.code == "site_not_found"


@pytest.mark.django_db
def test_a_busy_pool_raises_act_now_and_growing_unmet_quotes_raise_a_signal(
    provider: Any, customer: Any
) -> None:
    busy_node = server(provider)
    lease_node(offer_on(busy_node), customer, start=at(1, 1), end=at(3, 1))
    h200 = GpuModel.objects.get(slug="h200-sxm")
    for day in (20, 25, 26):  # one refusal the week before, two in the last week
        QuoteShortfall.objects.create(
            customer=customer,
            gpu_model=h200,
            gpu_count=16,
            start=at(2, 1),
            end=at(2, 2),
            pricing_mode="on_demand",
            requested_at=at(1, day),
        )

    signals = capacity_signals_evaluate(now=at(1, 28))

    [signal] = [s for s in signals if s.site_id == busy_node.site_id]
    assert signal.utilization == 1
    assert signal.level == SignalLevel.ACT_NOW
    assert (signal.unmet_quotes, signal.unmet_quotes_before, signal.unmet_growing) == (2, 1, True)
    assert signal.raised
    assert any("act now at 90%" in reason for reason in signal.reasons)
    # Evaluating the same day again replaces the day's rows.
    capacity_signals_evaluate(now=at(1, 28, 5))
    assert CapacitySignal.objects.filter(site=busy_node.site).count() == 1


@pytest.mark.django_db
def test_a_pool_between_the_thresholds_plans_scaling_and_an_idle_pool_is_ok(
    provider: Any, customer: Any, settings: Any
) -> None:
    settings.ECONOMICS_PLAN_SCALING_UTILIZATION_PCT = 40
    half = server(provider)
    lease_node(offer_on(half), customer, start=at(1, 1), end=at(3, 1), gpus=4)
    idle = server(provider)

    economics_run(now=at(1, 28))

    by_site = {s.site_id: s for s in CapacitySignal.objects.all()}
    assert by_site[half.site_id].level == SignalLevel.PLAN_SCALING
    assert by_site[half.site_id].utilization == Decimal("0.5")
    assert by_site[idle.site_id].level == SignalLevel.OK
    assert not by_site[idle.site_id].raised


@pytest.mark.django_db
def test_token_revenue_goes_to_the_offerings_servers(
    serving: tuple[SlaOffering, Node], provider: Any
) -> None:
    _, node = serving
    bill_until(at(2, 1, 2))
    asset_economics_refresh(now=at(2, 1, 3))
    january = AssetMonth.objects.get(node=node, month=date(2027, 1, 1))
    # 95 x (1,000 input at 0.50 + 250 output at 1.50 per million) = 0.0475 + 0.035625
    assert january.revenue == cents(Decimal(95_000) * Decimal("0.50") / 1_000_000) + cents(
        Decimal(95 * 250) * Decimal("1.50") / 1_000_000
    )
    assert set(january.revenue_detail["by_kind"]) <= {"input_tokens", "output_tokens"}
