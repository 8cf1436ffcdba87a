"""Batch tier and cached input tokens: reported through the API, billed apart, rolled up.

The offering sells online tokens at 0.50 / 1.50 USD per million input / output, prompt-cache
hits at 0.10, and a batch tier (completed within 24 h) at 0.25 / 0.75. Every expected figure is
worked out below from the events that were posted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import IntegrityError, transaction

from billing.models import Invoice, UsageEvent, UsageRollup
from billing.selectors.reconciliation import usage_reconciliation
from billing.services.cycle import billing_cycle_run
from billing.services.rollups import usage_rollups_refresh
from contracts.models import Contract
from leasing.models import SlaOffering, SlaSubscription
from leasing.services.offers import sla_offering_update, sla_subscription_create
from tests.billing.factories import event, token_contract
from tests.clock import at
from tests.leasing.factories import make_sla_offering

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/usage/events/"
TIERS: dict[str, Any] = {
    "price_per_million_cached_input_tokens": Decimal("0.10"),
    "batch_price_per_million_input_tokens": Decimal("0.25"),
    "batch_price_per_million_output_tokens": Decimal("0.75"),
    "batch_completion_hours": 24,
}


@pytest.fixture
def offering(provider: Any) -> SlaOffering:
    return make_sla_offering(provider, **TIERS)


@pytest.fixture
def contract(provider: Any, customer: Any, offering: SlaOffering) -> Contract:
    """A token-SLA contract of 2026 (0.50 / 1.50) subscribed to the offering, tagged search."""
    with time_machine.travel(at(1, 1), tick=False):
        contract = token_contract(provider, customer, term_start=at(1, 1))
        sla_subscription_create(
            offering=offering, contract=contract, tags={"team": "search", "project": "assistant"}
        )
    return contract


def january_usage(contract: Contract) -> list[dict[str, Any]]:
    """Two online requests (one with cache hits), a batch request, and a failed batch one."""
    return [
        event(
            "on-1",
            contract,
            at(1, 10, 9),
            input_tokens=1_000_000,
            cached_input_tokens=400_000,
            output_tokens=200_000,
        ),
        event(
            "on-2",
            contract,
            at(1, 11, 9),
            input_tokens=500_000,
            output_tokens=100_000,
            tags={"team": "ads"},
        ),
        event(
            "batch-1",
            contract,
            at(1, 12, 9),
            mode="batch",
            input_tokens=2_000_000,
            cached_input_tokens=1_000_000,
            output_tokens=800_000,
            ttft_ms=None,
            e2e_ms=None,
            tags={"team": "ads", "project": "nightly-eval"},
        ),
        event(
            "batch-2",
            contract,
            at(1, 12, 10),
            mode="batch",
            status="error",
            input_tokens=900_000,
            output_tokens=0,
            ttft_ms=None,
            e2e_ms=None,
        ),
    ]


def post(client: Any, when: datetime, events: list[dict[str, Any]]) -> dict[str, Any]:
    with time_machine.travel(when, tick=False):
        response = client.post(EVENTS, {"events": events}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def test_batch_and_cached_tokens_are_billed_on_their_own_lines_with_their_reasons(
    contract: Contract, provider: Any, client_for: Any
) -> None:
    client = client_for(provider)
    outcome = post(client, at(1, 13), january_usage(contract))
    assert outcome["accepted"] == 4, outcome
    stored = UsageEvent.objects.get(event_id="batch-1")
    assert (stored.mode, stored.cached_input_tokens) == ("batch", 1_000_000)
    assert stored.tags == {"team": "ads", "project": "nightly-eval"}
    assert UsageEvent.objects.get(event_id="on-1").mode == "online"  # the default

    with time_machine.travel(at(2, 1, 2), tick=False):
        billing_cycle_run(now=at(2, 1, 2), deliver=False)
    invoice = Invoice.objects.get(contract=contract, period_start=at(1, 1))
    lines = {line.kind: line for line in invoice.lines.all()}
    # Online input not from the cache: 1,000,000 - 400,000 + 500,000 at 0.50.
    # Cache hits of both modes: 400,000 + 1,000,000 at 0.10.
    # Online output: 300,000 at 1.50. Batch input not from the cache: 1,000,000 at 0.25.
    # Batch output: 800,000 at 0.75. The failed batch request bills nothing.
    expected = {
        "input_tokens": (Decimal("1.1"), Decimal("0.50"), Decimal("0.55")),
        "cached_input_tokens": (Decimal("1.4"), Decimal("0.10"), Decimal("0.14")),
        "output_tokens": (Decimal("0.3"), Decimal("1.50"), Decimal("0.45")),
        "batch_input_tokens": (Decimal("1"), Decimal("0.25"), Decimal("0.25")),
        "batch_output_tokens": (Decimal("0.8"), Decimal("0.75"), Decimal("0.60")),
    }
    assert {
        kind: (line.quantity, line.unit_price, line.amount) for kind, line in lines.items()
    } == expected
    assert invoice.subtotal == Decimal("1.99")
    cached = lines["cached_input_tokens"].description
    assert "1,400,000 successful cached input tokens" in cached
    assert "served from the prompt cache" in cached and "instead of 0.5 USD" in cached
    batch = lines["batch_output_tokens"].description
    assert "batch tier: requests completed within 24 h" in batch
    assert "instead of the online 1.5 USD per million" in batch
    assert "(not served from the prompt cache)" in lines["input_tokens"].description
    assert lines["batch_input_tokens"].inputs == {"tokens": 1_000_000, "mode": "batch"}


def test_rollups_show_the_cache_hit_rate_and_the_batch_share(
    contract: Contract, provider: Any, customer: Any, client_for: Any
) -> None:
    post(client_for(provider), at(1, 13), january_usage(contract))
    usage_rollups_refresh(now=at(1, 13, 1))
    rows = UsageRollup.objects.filter(contract=contract)
    batch_hour = rows.get(hour=at(1, 12, 9))
    assert (batch_hour.batch_requests_success, batch_hour.cached_input_tokens_success) == (
        1,
        1_000_000,
    )
    # Batch requests are promised a deadline, not latency: no TTFT percentile for that hour.
    assert batch_hour.ttft_p95_ms is None
    response = client_for(customer).get(f"/api/v1/usage/rollups/?contract={contract.pk}")
    assert response.status_code == 200, response.content
    by_hour = {row["hour"]: row for row in response.json()["results"]}
    cached_hour = by_hour["2026-01-10T09:00:00Z"]
    assert cached_hour["cache_hit_rate_pct"] == 40.0  # 400,000 of 1,000,000 input tokens
    assert cached_hour["batch_share_pct"] == 0.0
    assert by_hour["2026-01-12T09:00:00Z"]["batch_share_pct"] == 100.0
    assert by_hour["2026-01-12T10:00:00Z"]["batch_share_pct"] is None  # no success that hour


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ({"cached_input_tokens": 1001}, "cached_exceeds_input"),
        ({"cached_input_tokens": -1}, "negative_tokens"),
        ({"mode": "offline"}, "unknown_mode"),
        ({"tags": {"Team": "ads"}}, "invalid_tags"),
        ({"tags": {"team": ""}}, "invalid_tags"),
        ({"tags": {f"k{i}": "v" for i in range(11)}}, "invalid_tags"),
        ({"tags": {"team": 7}}, "invalid_tags"),
        ({"tags": ["team"]}, "invalid_tags"),
    ],
)
def test_a_bad_mode_cached_count_or_tag_rejects_only_that_event(
    contract: Contract, provider: Any, client_for: Any, extra: dict[str, Any], code: str
) -> None:
    good = event("good", contract, at(1, 10))
    bad = event("bad", contract, at(1, 10), input_tokens=1000, **extra)
    outcome = post(client_for(provider), at(1, 13), [good, bad])
    assert outcome["accepted"] == 1
    assert outcome["results"][1]["reason"]["code"] == code
    assert not UsageEvent.objects.filter(event_id="bad").exists()


def test_batch_events_are_refused_on_a_contract_without_a_batch_tier(
    provider: Any, customer: Any, client_for: Any
) -> None:
    with time_machine.travel(at(1, 1), tick=False):
        contract = token_contract(provider, customer, term_start=at(1, 1))
        sla_subscription_create(offering=make_sla_offering(provider), contract=contract)
    batch = event("b", contract, at(1, 10), mode="batch", ttft_ms=None, e2e_ms=None)
    online_without_latency = event("o", contract, at(1, 10), ttft_ms=None)
    outcome = post(client_for(provider), at(1, 13), [batch, online_without_latency])
    assert [row["reason"]["code"] for row in outcome["results"]] == [
        "batch_not_offered",
        "missing_field",
    ]


def test_the_subscription_keeps_the_tier_prices_it_was_signed_at(
    contract: Contract, offering: SlaOffering, provider: Any, client_for: Any
) -> None:
    sla_offering_update(
        offering=offering,
        changes={
            "price_per_million_cached_input_tokens": Decimal("0.40"),
            "batch_price_per_million_input_tokens": Decimal("0.45"),
        },
    )
    subscription = SlaSubscription.objects.get(contract=contract)
    assert subscription.price_per_million_cached_input_tokens == Decimal("0.10")
    assert subscription.batch_price_per_million_input_tokens == Decimal("0.25")
    post(client_for(provider), at(1, 13), january_usage(contract))
    with time_machine.travel(at(2, 1, 2), tick=False):
        billing_cycle_run(now=at(2, 1, 2), deliver=False)
    invoice = Invoice.objects.get(contract=contract, period_start=at(1, 1))
    assert invoice.lines.get(kind="cached_input_tokens").unit_price == Decimal("0.10")


def test_the_api_sets_and_shows_an_offerings_tiers_and_refuses_half_a_batch_tier(
    provider: Any, client_for: Any
) -> None:
    client = client_for(provider)
    body = {
        "served_model_name": "qwen-2.5-72b",
        "price_per_million_input_tokens": "0.40",
        "price_per_million_output_tokens": "1.20",
        "currency": "USD",
        "availability_slo_pct": "99.9",
        "ttft_p95_ms": 500,
        "tpot_p99_ms": 60,
        "committed_tokens_per_s": 1000,
    }
    half = client.post(
        "/api/v1/sla-offerings/",
        {**body, "batch_price_per_million_input_tokens": "0.20"},
        format="json",
    )
    assert half.status_code == 400, half.content
    assert "incomplete_batch_tier" in half.content.decode()
    created = client.post(
        "/api/v1/sla-offerings/",
        {
            **body,
            "price_per_million_cached_input_tokens": "0.08",
            "batch_price_per_million_input_tokens": "0.20",
            "batch_price_per_million_output_tokens": "0.60",
            "batch_completion_hours": 24,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    shown = created.json()
    assert shown["price_per_million_cached_input_tokens"] == "0.080000"
    assert (shown["batch_price_per_million_output_tokens"], shown["batch_completion_hours"]) == (
        "0.600000",
        24,
    )


def test_the_database_refuses_cached_tokens_above_input_and_unknown_modes(
    contract: Contract, provider: Any, client_for: Any
) -> None:
    post(client_for(provider), at(1, 13), january_usage(contract))
    stored = UsageEvent.objects.filter(event_id="on-2")
    for change in (
        {"cached_input_tokens": 500_001},
        {"mode": "offline"},
        {"tags": {"Team": "x"}},
        {"tags": {f"k{i}": "v" for i in range(11)}},
        {"tags": {"team": 1}},
        {"tags": ["team"]},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            stored.update(**change)
    with pytest.raises(IntegrityError), transaction.atomic():
        SlaOffering.objects.filter(pk=SlaSubscription.objects.get().offering_id).update(
            batch_completion_hours=None
        )


def test_tier_prices_survive_a_round_trip_through_a_new_month(
    contract: Contract, provider: Any, client_for: Any
) -> None:
    """Late batch usage keeps its batch price on the next invoice's late lines."""
    client = client_for(provider)
    post(client, at(1, 13), january_usage(contract))
    with time_machine.travel(at(2, 1, 2), tick=False):
        billing_cycle_run(now=at(2, 1, 2), deliver=False)
    late = event(
        "late-batch",
        contract,
        datetime(2026, 1, 30, tzinfo=UTC),
        mode="batch",
        input_tokens=400_000,
        cached_input_tokens=100_000,
        output_tokens=40_000,
        ttft_ms=None,
        e2e_ms=None,
    )
    assert post(client, at(2, 3), [late])["late"] == 1
    with time_machine.travel(at(3, 1, 2), tick=False):
        billing_cycle_run(now=at(3, 1, 2), deliver=False)
    february = Invoice.objects.get(contract=contract, period_start=at(2, 1))
    lines = {line.kind: (line.quantity, line.amount) for line in february.lines.all()}
    assert lines == {
        "late_cached_input_tokens": (Decimal("0.1"), Decimal("0.01")),
        "late_batch_input_tokens": (Decimal("0.3"), Decimal("0.08")),  # 0.075 half-up
        "late_batch_output_tokens": (Decimal("0.04"), Decimal("0.03")),
    }
    assert february.period_end - february.period_start > timedelta(days=27)


def test_reconciliation_counts_cached_and_batch_lines_as_the_tokens_they_bill(
    contract: Contract, provider: Any, client_for: Any
) -> None:
    """The nightly reconciliation adds the new line kinds back up to each request's tokens."""
    client = client_for(provider)
    post(client, at(1, 13), january_usage(contract))
    with time_machine.travel(at(2, 1, 2), tick=False):
        billing_cycle_run(now=at(2, 1, 2), deliver=False)
    late = event(
        "late-batch",
        contract,
        datetime(2026, 1, 30, tzinfo=UTC),
        mode="batch",
        input_tokens=400_000,
        cached_input_tokens=100_000,
        output_tokens=40_000,
        ttft_ms=None,
        e2e_ms=None,
    )
    post(client, at(2, 3), [late])
    with time_machine.travel(at(3, 1, 2), tick=False):
        billing_cycle_run(now=at(3, 1, 2), deliver=False)
    result = usage_reconciliation(contract_ids=[contract.pk])
    issued = [period for period in result.periods if period.invoice_number is not None]
    assert [period.status for period in issued] == ["ok", "ok"]
    january = issued[0]
    assert (january.invoiced_input_tokens, january.invoiced_output_tokens) == (
        3_500_000,
        1_100_000,
    )
    assert result.clean


def test_a_replayed_event_with_other_tags_or_mode_stays_as_first_counted(
    contract: Contract, provider: Any, client_for: Any
) -> None:
    client = client_for(provider)
    first = january_usage(contract)
    assert post(client, at(1, 13), first)["accepted"] == 4
    replay = [
        {**row, "tags": {"team": "someone-else"}, "cached_input_tokens": 0, "mode": "online"}
        for row in first
        if row["status"] == "success"
    ]
    replay[2]["ttft_ms"] = replay[2]["e2e_ms"] = 100.0  # the batch request, re-sent as online
    again = post(client, at(1, 14), replay)
    assert (again["accepted"], again["duplicate"]) == (0, 3)
    stored = UsageEvent.objects.get(event_id="batch-1")
    assert (stored.mode, stored.cached_input_tokens, stored.tags["team"]) == (
        "batch",
        1_000_000,
        "ads",
    )
