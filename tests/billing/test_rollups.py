"""Hourly rollups: computed in SQL, incremental and idempotent, listed per party of a contract."""

from __future__ import annotations

import math
import random
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection

from billing.models import UsageRollup, UsageRollupRun
from billing.services.ingest import usage_batch_ingest
from billing.services.rollups import usage_rollups_refresh, usage_rollups_refresh_batch
from billing.tasks import rollup_usage
from tests.billing.factories import event, events, token_contract

ROLLUPS = "/api/v1/usage/rollups/"
NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
HOUR = datetime(2026, 6, 15, 9, 0, tzinfo=UTC)
VALUES = [f.name for f in UsageRollup._meta.get_fields() if f.name not in {"id", "refreshed_at"}]


def percentile_cont(values: list[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks, as PostgreSQL's percentile_cont."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def ingest(provider, raw, now=NOW):
    return usage_batch_ingest(provider=provider, raw_events=raw, now=now)


def snapshot():
    return list(UsageRollup.objects.order_by("contract_id", "hour").values(*VALUES))


@pytest.fixture
def contract(provider, customer):
    return token_contract(provider, customer)


@pytest.mark.django_db
def test_an_hour_is_rolled_up_with_percentiles_as_computed_by_hand(provider, contract):
    rng = random.Random(6)
    raw, successes = [], []
    for i in range(200):
        status = rng.choices(["success", "timeout", "error", "rejected"], [85, 5, 5, 5])[0]
        ttft, e2e, tpot = rng.uniform(20, 400), rng.uniform(300, 5000), rng.uniform(5, 40)
        at = HOUR + timedelta(seconds=rng.uniform(0, 3599.9))
        raw.append(
            event(
                f"e{i}",
                contract,
                at,
                status=status,
                input_tokens=rng.randint(10, 4000),
                output_tokens=rng.randint(1, 1000),
                ttft_ms=round(ttft, 3),
                e2e_ms=round(e2e, 3),
                tpot_ms=round(tpot, 3) if i % 7 else None,
            )
        )
        if status == "success":
            successes.append(raw[-1])
    raw.append(event("next-hour", contract, HOUR + timedelta(hours=1)))
    assert ingest(provider, raw).accepted == 201

    run = usage_rollups_refresh(now=NOW)

    assert run.hours_refreshed == 2
    rollup = UsageRollup.objects.get(contract=contract, hour=HOUR)
    count = {s: sum(1 for e in raw[:200] if e["status"] == s) for s in ("success", "timeout")}
    rejected = sum(1 for e in raw[:200] if e["status"] == "rejected")
    assert rollup.requests_total == 200
    assert rollup.requests_success == count["success"] == len(successes)
    assert rollup.requests_timeout == count["timeout"]
    assert rollup.requests_rejected == rejected
    assert rollup.requests_error == 200 - count["success"] - count["timeout"] - rejected
    assert rollup.input_tokens_success == sum(e["input_tokens"] for e in successes)
    assert rollup.output_tokens_success == sum(e["output_tokens"] for e in successes)
    for metric in ("ttft", "e2e", "tpot"):
        values = [e[f"{metric}_ms"] for e in successes if e[f"{metric}_ms"] is not None]
        for label, fraction in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            expected = percentile_cont(values, fraction)
            assert getattr(rollup, f"{metric}_{label}_ms") == pytest.approx(expected, rel=1e-12)
    availability = Decimal(100 * len(successes)) / Decimal(200 - rejected)
    assert rollup.availability_pct == availability.quantize(Decimal("0.0001"))
    assert rollup.late_events == 0


@pytest.mark.django_db
def test_availability_leaves_rejected_requests_out_and_is_null_without_served_ones(
    provider, contract
):
    raw = [
        event("s1", contract, HOUR),
        event("s2", contract, HOUR),
        event("s3", contract, HOUR),
        event("t1", contract, HOUR, status="timeout", ttft_ms=None, e2e_ms=30000.0),
        event("r1", contract, HOUR, status="rejected", ttft_ms=None, e2e_ms=None),
        event("r2", contract, HOUR + timedelta(hours=1), status="rejected", ttft_ms=None),
    ]
    ingest(provider, raw)
    usage_rollups_refresh(now=NOW)
    served, only_rejected = UsageRollup.objects.order_by("hour")
    assert served.availability_pct == Decimal("75.0000")
    assert served.e2e_p99_ms == 900.0  # the timeout's 30 s is not a served request's latency
    assert only_rejected.availability_pct is None
    assert only_rejected.ttft_p50_ms is None
    assert (only_rejected.requests_total, only_rejected.requests_rejected) == (1, 1)


@pytest.mark.django_db
def test_refreshing_again_changes_nothing(provider, contract):
    ingest(provider, events(contract, HOUR, 300, step_s=30))
    usage_rollups_refresh(now=NOW)
    first = snapshot()
    assert len(first) == 3
    usage_rollups_refresh(now=NOW + timedelta(minutes=10))
    usage_rollups_refresh(since=datetime(2020, 1, 1, tzinfo=UTC), now=NOW + timedelta(minutes=20))
    assert snapshot() == first
    assert UsageRollup.objects.count() == 3


@pytest.mark.django_db
def test_a_sweep_recomputes_only_hours_touched_since_the_last_run(provider, contract):
    earlier = NOW - timedelta(hours=1)
    ingest(provider, events(contract, HOUR, 3), now=earlier)
    ingest(provider, events(contract, HOUR + timedelta(hours=1), 2, prefix="b"), now=earlier)
    first = usage_rollups_refresh(now=NOW)
    assert first.since is None and first.hours_refreshed == 2

    later = NOW + timedelta(hours=2)
    ingest(provider, events(contract, HOUR, 4, prefix="late-arrival"), now=later)
    second = usage_rollups_refresh(now=later + timedelta(minutes=10))
    assert second.hours_refreshed == 1
    assert second.since == NOW - timedelta(minutes=15)
    assert UsageRollup.objects.get(hour=HOUR).requests_total == 7
    assert UsageRollupRun.objects.count() == 2
    # The next sweep still looks back over the overlap; the one after has nothing new.
    assert usage_rollups_refresh(now=later + timedelta(hours=1)).hours_refreshed == 1
    assert usage_rollups_refresh(now=later + timedelta(hours=2)).hours_refreshed == 0


@pytest.mark.django_db
def test_the_batch_refresh_touches_only_that_batchs_hours(provider, contract):
    ingest(provider, events(contract, HOUR, 2))
    outcome = ingest(provider, events(contract, HOUR + timedelta(hours=2), 2, prefix="b"))
    assert usage_rollups_refresh_batch(batch_id=outcome.batch_id) == 1
    assert list(UsageRollup.objects.values_list("hour", flat=True)) == [HOUR + timedelta(hours=2)]


@pytest.mark.django_db
def test_late_events_are_counted_in_their_hour(provider, contract):
    ingest(provider, [event("may", contract, datetime(2026, 5, 20, 8, 30, tzinfo=UTC))])
    usage_rollups_refresh(now=NOW)
    assert UsageRollup.objects.get().late_events == 1


# ---------------------------------------------------------------- the API


@pytest.fixture
def two_tenants(provider, other_provider, customer, other_customer):
    mine = token_contract(provider, customer)
    theirs = token_contract(other_provider, other_customer)
    ingest(provider, events(mine, HOUR, 3) + events(mine, HOUR + timedelta(hours=1), 1, prefix="x"))
    ingest(other_provider, events(theirs, HOUR, 2))
    usage_rollups_refresh(now=NOW)
    return mine, theirs


@pytest.mark.django_db
def test_each_party_sees_only_rollups_of_its_contracts(
    client_for, provider, customer, other_customer, operator, two_tenants
):
    mine, theirs = two_tenants
    for organization, expected in [
        (provider, {mine.pk}),
        (customer, {mine.pk}),
        (other_customer, {theirs.pk}),
        (operator, {mine.pk, theirs.pk}),
    ]:
        rows = client_for(organization).get(ROLLUPS).json()["results"]
        assert {row["contract"] for row in rows} == expected, organization


@pytest.mark.django_db
def test_another_tenants_rollup_is_404_and_filtering_for_it_finds_nothing(
    client_for, customer, two_tenants
):
    _, theirs = two_tenants
    client = client_for(customer)
    their_rollup = UsageRollup.objects.get(contract=theirs)
    assert client.get(f"{ROLLUPS}{their_rollup.pk}/").status_code == 404
    assert client.get(ROLLUPS, {"contract": theirs.pk}).json()["results"] == []


@pytest.mark.django_db
def test_a_rollup_reads_with_its_contract_number_and_figures(client_for, customer, two_tenants):
    mine, _ = two_tenants
    rollup = UsageRollup.objects.get(contract=mine, hour=HOUR)
    row = client_for(customer).get(f"{ROLLUPS}{rollup.pk}/").json()
    assert row["contract_number"] == mine.number
    assert row["hour"] == "2026-06-15T09:00:00Z"
    assert (row["requests_total"], row["requests_success"]) == (3, 3)
    assert (row["input_tokens_success"], row["output_tokens_success"]) == (3000, 750)
    assert row["availability_pct"] == "100.0000"
    assert row["ttft_p95_ms"] == 120.0


@pytest.mark.django_db
def test_rollups_filter_by_window_and_order(client_for, provider, two_tenants):
    mine, _ = two_tenants
    client = client_for(provider)
    newest_first = [row["hour"] for row in client.get(ROLLUPS).json()["results"]]
    assert newest_first == ["2026-06-15T10:00:00Z", "2026-06-15T09:00:00Z"]
    oldest_first = client.get(ROLLUPS, {"ordering": "hour"}).json()["results"]
    assert [row["hour"] for row in oldest_first] == list(reversed(newest_first))
    window = {"start": "2026-06-15T09:30:00Z", "end": "2026-06-15T11:00:00Z"}
    assert [r["hour"] for r in client.get(ROLLUPS, window).json()["results"]] == [
        "2026-06-15T10:00:00Z"
    ]
    by_number = client.get(ROLLUPS, {"contract_number": mine.number}).json()["results"]
    assert len(by_number) == 2
    page = client.get(ROLLUPS, {"page_size": 1}).json()
    assert len(page["results"]) == 1 and page["next"]
    assert len(client.get(page["next"]).json()["results"]) == 1


@pytest.mark.django_db
def test_the_rollup_list_does_not_grow_queries_with_rows(
    client_for, provider, customer, django_assert_max_num_queries
):
    for _ in range(3):
        contract = token_contract(provider, customer)
        ingest(provider, events(contract, HOUR, 30, prefix=f"c{contract.pk}", step_s=300))
    usage_rollups_refresh(now=NOW)
    client = client_for(customer)
    with django_assert_max_num_queries(3):
        response = client.get(ROLLUPS)
    assert len(response.json()["results"]) == 9


# ---------------------------------------------------------------- a real worker


@pytest.mark.worker
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_ingest_enqueues_a_rollup_refresh_that_a_real_worker_runs(
    celery_worker_process, client_for, provider, customer
):
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    contract = token_contract(
        provider, customer, term_start=now - timedelta(days=30), term_end=now + timedelta(days=365)
    )
    raw = [
        event("w1", contract, now, ttft_ms=100.0),
        event("w2", contract, now, ttft_ms=300.0),
        event("w3", contract, now, status="error", ttft_ms=None),
    ]
    response = client_for(provider).post("/api/v1/usage/events/", {"events": raw}, format="json")
    assert response.status_code == 201

    deadline = time.monotonic() + 60
    while not UsageRollup.objects.filter(contract=contract).exists():
        assert time.monotonic() < deadline, "the ingest-side refresh never ran"
        time.sleep(0.2)
    connection.close()
    rollup = UsageRollup.objects.get(contract=contract)
    assert (rollup.requests_total, rollup.requests_success, rollup.requests_error) == (3, 2, 1)
    assert rollup.ttft_p50_ms == 200.0
    assert rollup.availability_pct == Decimal("66.6667")
    assert not UsageRollupRun.objects.exists()

    assert rollup_usage.delay().get(timeout=60) == 1
    assert UsageRollupRun.objects.get().hours_refreshed == 1


@pytest.mark.django_db
def test_the_admin_shows_batches_rollups_and_runs_read_only(admin_client, two_tenants):
    for model in ("usagebatch", "usagerollup", "usagerolluprun"):
        assert admin_client.get(f"/admin/billing/{model}/").status_code == 200
        assert admin_client.get(f"/admin/billing/{model}/add/").status_code == 403
    rollup = UsageRollup.objects.first()
    assert rollup is not None
    page = admin_client.get(f"/admin/billing/usagerollup/{rollup.pk}/change/")
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
