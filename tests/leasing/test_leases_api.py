"""Holds and leases through the API: allocation, contracts, extension, exit, preemption."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from contracts.choices import ContractStatus, EventKind
from leasing.choices import HoldStatus, LeaseStatus
from leasing.models import Allocation, Hold, Lease, PreemptionNotice, Quote
from tests.contracts.factories import ACCEPTANCE_TOKENS, EXIT_3_MONTHS
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
HOLDS = "/api/v1/holds/"


def body(offer, count=2, hours=24, start=None, **extra):
    return {
        "offer": offer.pk,
        "gpu_count": count,
        "start": (start or next_hour()).isoformat(),
        "hours": hours,
        **extra,
    }


def overlapping_pairs() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*) FROM leasing_allocation a JOIN leasing_allocation b
              ON a.gpu_id = b.gpu_id AND a.id < b.id
             AND a.released_at IS NULL AND b.released_at IS NULL
             AND a.period && b.period
            """
        )
        return cursor.fetchone()[0]


def test_a_lease_books_gpus_on_one_node_and_creates_its_contract(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=2, contract_template=[EXIT_3_MONTHS])
    response = client_for(customer).post(LEASES, body(offer, count=4), format="json")
    assert response.status_code == 201, response.json()
    lease = response.json()
    assert lease["status"] == "active"
    assert lease["placement"] == "single_node"
    assert len({row["node"] for row in lease["allocations"]}) == 1
    assert len(lease["allocations"]) == 4
    assert lease["price_per_gpu_hour"] == "2.400000"
    contract = Lease.objects.get(pk=lease["id"]).contract
    assert contract.status == ContractStatus.ACTIVE
    assert contract.lessor == provider and contract.lessee == customer
    assert contract.committed_gpus == 4
    assert contract.clauses.get().kind == "exit_terms"


def test_more_gpus_than_a_node_spread_across_nodes_of_the_site(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=2)
    response = client_for(customer).post(LEASES, body(offer, count=12), format="json")
    assert response.status_code == 201
    assert response.json()["placement"] == "multi_node"


def test_capacity_gone_is_409_with_the_free_count(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    assert client.post(LEASES, body(offer, count=6), format="json").status_code == 201
    response = client.post(LEASES, body(offer, count=3), format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "capacity_gone"
    assert response.json()["detail"] == {"free_gpus": 2, "requested": 3}
    assert Lease.objects.count() == 1


def test_a_reserved_lease_uses_the_ladder(client_for, provider, customer):
    offer, _ = make_pool(provider)
    response = client_for(customer).post(
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": 1,
            "start": next_hour().isoformat(),
            "pricing_mode": "reserved",
            "term_months": 6,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    # The 3-month rung (10 % off) is the largest <= 6 months: 2.40 x 0.90 = 2.16.
    assert response.json()["price_per_gpu_hour"] == "2.160000"


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"gpu_count": 0}, 400, "invalid"),
        ({"hours": None, "end": "2020-01-01T00:00:00Z"}, 400, "invalid_window"),
        ({"start": "2020-01-01T00:00:00Z"}, 400, "window_in_past"),
        ({"gpu_count": 99}, 409, "capacity_gone"),
        ({"offer": 999999}, 404, "offer_not_found"),
        ({"pricing_mode": "reserved"}, 400, "term_required"),
    ],
)
def test_bad_lease_requests_get_codes_and_allocate_nothing(
    client_for, provider, customer, overrides, status, code
):
    offer, _ = make_pool(provider)
    data = {k: v for k, v in {**body(offer), **overrides}.items() if v is not None}
    response = client_for(customer).post(LEASES, data, format="json")
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert Allocation.objects.count() == 0


def test_a_provider_cannot_lease(client_for, provider):
    offer, _ = make_pool(provider)
    response = client_for(provider).post(LEASES, body(offer), format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "customer_only"


def test_a_hold_reserves_and_becomes_a_lease_without_a_gap(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    hold = client.post(HOLDS, body(offer, count=8), format="json")
    assert hold.status_code == 201, hold.json()
    hold_gpus = {row["gpu_id"] for row in hold.json()["allocations"]}
    blocked = client_for(customer).post(LEASES, body(offer, count=1), format="json")
    assert blocked.status_code == 409
    lease = client.post(LEASES, {"hold": hold.json()["id"]}, format="json")
    assert lease.status_code == 201, lease.json()
    assert {row["gpu_id"] for row in lease.json()["allocations"]} == hold_gpus
    assert Hold.objects.get().status == HoldStatus.CONVERTED
    again = client.post(LEASES, {"hold": hold.json()["id"]}, format="json")
    assert again.status_code == 409
    assert again.json()["code"] == "hold_converted"


def test_an_expired_hold_frees_its_gpus_and_cannot_be_converted(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    hold = client.post(HOLDS, body(offer, count=8), format="json").json()
    Hold.objects.filter(pk=hold["id"]).update(
        expires_at=Hold.objects.get(pk=hold["id"]).created_at - timedelta(seconds=1)
    )
    late = client.post(LEASES, {"hold": hold["id"]}, format="json")
    assert late.status_code == 409
    assert late.json()["code"] == "hold_expired"
    other = client_for(customer).post(LEASES, body(offer, count=8), format="json")
    assert other.status_code == 201
    assert Hold.objects.get().status == HoldStatus.EXPIRED
    assert overlapping_pairs() == 0


def test_another_customers_hold_and_lease_are_404(client_for, provider, customer, other_customer):
    offer, _ = make_pool(provider)
    mine = client_for(customer)
    hold = mine.post(HOLDS, body(offer, count=1), format="json").json()
    lease = mine.post(LEASES, body(offer, count=1), format="json").json()
    theirs = client_for(other_customer)
    assert theirs.post(LEASES, {"hold": hold["id"]}, format="json").status_code == 404
    assert theirs.get(f"{HOLDS}{hold['id']}/").status_code == 404
    assert theirs.post(f"{HOLDS}{hold['id']}/release").status_code == 404
    assert theirs.get(f"{LEASES}{lease['id']}/").status_code == 404
    assert (
        theirs.post(
            f"{LEASES}{lease['id']}/extend", {"end": "2030-01-01T00:00:00Z"}, format="json"
        ).status_code
        == 404
    )
    assert theirs.get(f"{LEASES}{lease['id']}/acceptance-runs/").status_code == 404
    assert theirs.get(LEASES).json()["results"] == []
    # The provider sees the lease of its offer, read-only.
    seen = client_for(provider).get(LEASES).json()["results"]
    assert [row["id"] for row in seen] == [lease["id"]]


def test_the_same_lease_post_with_one_key_makes_one_lease(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    data = body(offer, count=2)
    first = client.post(LEASES, data, format="json", HTTP_IDEMPOTENCY_KEY="lease-1")
    second = client.post(LEASES, data, format="json", HTTP_IDEMPOTENCY_KEY="lease-1")
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    assert Lease.objects.count() == 1


def test_extension_only_when_the_same_gpus_are_free(client_for, provider, customer, other_customer):
    offer, _ = make_pool(provider, gpu_count=2)
    client = client_for(customer)
    start = next_hour()
    lease = client.post(
        LEASES,
        {"offer": offer.pk, "gpu_count": 2, "start": start.isoformat(), "hours": 10},
        format="json",
    ).json()
    longer = client.post(
        f"{LEASES}{lease['id']}/extend",
        {"end": (start + timedelta(hours=20)).isoformat()},
        format="json",
    )
    assert longer.status_code == 200, longer.json()
    assert all(
        row["end"] == (start + timedelta(hours=20)).isoformat()
        for row in longer.json()["allocations"]
    )
    booked = client_for(other_customer).post(
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": 2,
            "start": (start + timedelta(hours=20)).isoformat(),
            "hours": 5,
        },
        format="json",
    )
    assert booked.status_code == 201
    blocked = client.post(
        f"{LEASES}{lease['id']}/extend",
        {"end": (start + timedelta(hours=30)).isoformat()},
        format="json",
    )
    assert blocked.status_code == 409
    assert Lease.objects.get(pk=lease["id"]).contract.term_end == start + timedelta(hours=20)


def test_an_on_demand_lease_preempts_interruptible_capacity_with_notice(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider, preemption_notice_minutes=5)
    cheap = client_for(other_customer).post(
        LEASES, body(offer, count=8, pricing_mode="interruptible"), format="json"
    )
    assert cheap.status_code == 201
    assert cheap.json()["price_per_gpu_hour"] == "1.200000"
    start = next_hour(2)
    urgent = client_for(customer).post(
        LEASES,
        {"offer": offer.pk, "gpu_count": 3, "start": start.isoformat(), "hours": 4},
        format="json",
    )
    assert urgent.status_code == 201, urgent.json()
    interruptible = Lease.objects.get(pk=cheap.json()["id"])
    cut = interruptible.allocations.filter(ended_reason="preempted")
    assert cut.count() == 3
    assert all(a.period.upper == start for a in cut)
    notice = PreemptionNotice.objects.get(lease=interruptible)
    assert notice.gpu_count == 3 and notice.cut_at == start
    assert interruptible.contract.events.filter(kind=EventKind.PREEMPTED).exists()
    assert overlapping_pairs() == 0
    # An interruptible lease never preempts anyone.
    more = client_for(other_customer).post(
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": 8,
            "start": start.isoformat(),
            "hours": 1,
            "pricing_mode": "interruptible",
        },
        format="json",
    )
    assert more.status_code == 409


def test_acceptance_runs_on_a_lease_start_billing(client_for, provider, customer):
    offer, _ = make_pool(provider, contract_template=[ACCEPTANCE_TOKENS])
    client = client_for(customer)
    lease = client.post(LEASES, body(offer, count=8, start=timezone.now()), format="json").json()
    assert lease["status"] == "pending_acceptance"
    run = client.post(
        f"{LEASES}{lease['id']}/acceptance-runs/",
        {
            "metric": "output_tokens_per_s",
            "measured_value": "2800",
            "quality_delta_pct": "0.2",
            "report": {"tool": "vllm bench serve", "runs": 3},
        },
        format="json",
    )
    assert run.status_code == 201, run.json()
    assert run.json()["passed"] is True
    assert "2800" in run.json()["explanation"] or "2,800" in run.json()["explanation"]
    refreshed = client.get(f"{LEASES}{lease['id']}/").json()
    assert refreshed["status"] == "active"
    assert refreshed["billing_start"] is not None
    runs = client.get(f"{LEASES}{lease['id']}/acceptance-runs/").json()["results"]
    assert runs[0]["report"] == {"tool": "vllm bench serve", "runs": 3}


def test_an_acceptance_run_before_the_lease_starts_is_422(client_for, provider, customer):
    offer, _ = make_pool(provider, contract_template=[ACCEPTANCE_TOKENS])
    client = client_for(customer)
    lease = client.post(LEASES, body(offer, count=1, start=next_hour(3)), format="json").json()
    early = client.post(
        f"{LEASES}{lease['id']}/acceptance-runs/",
        {"metric": "output_tokens_per_s", "measured_value": "2800", "quality_delta_pct": "0.2"},
        format="json",
    )
    assert early.status_code == 422
    assert early.json()["code"] == "run_before_start"


def test_failed_acceptance_lets_the_customer_reject_and_frees_the_gpus(
    client_for, provider, customer
):
    template = [{**ACCEPTANCE_TOKENS, "max_attempts": 1}]
    offer, _ = make_pool(provider, contract_template=template)
    client = client_for(customer)
    lease = client.post(LEASES, body(offer, count=8, start=timezone.now()), format="json").json()
    failed = client.post(
        f"{LEASES}{lease['id']}/acceptance-runs/",
        {"metric": "output_tokens_per_s", "measured_value": "1000", "quality_delta_pct": "0.2"},
        format="json",
    )
    assert failed.json()["passed"] is False
    rejected = client.post(f"{LEASES}{lease['id']}/reject")
    assert rejected.status_code == 200, rejected.json()
    assert rejected.json()["status"] == "cancelled"
    again = client.post(LEASES, body(offer, count=8), format="json")
    assert again.status_code == 201


def test_the_provider_replaces_a_failed_gpu_and_history_shows_both(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=2, gpu_count=4)
    lease = client_for(customer).post(LEASES, body(offer, count=4), format="json").json()
    failed_gpu = lease["allocations"][0]["gpu_id"]
    response = client_for(provider).post(
        f"{LEASES}{lease['id']}/replace-gpu", {"gpu": failed_gpu}, format="json"
    )
    assert response.status_code == 200, response.json()
    rows = response.json()["allocations"]
    old = next(r for r in rows if r["gpu_id"] == failed_gpu)
    new = next(r for r in rows if r["replaces"] == old["id"])
    assert old["ended_reason"] == "replaced"
    assert new["gpu_id"] != failed_gpu
    assert (
        client_for(customer)
        .post(f"{LEASES}{lease['id']}/replace-gpu", {"gpu": failed_gpu}, format="json")
        .status_code
        == 403
    )


def test_a_lease_list_has_a_fixed_number_of_queries(
    client_for, provider, customer, django_assert_max_num_queries
):
    offer, _ = make_pool(provider, nodes=2)
    client = client_for(customer)
    for _ in range(4):
        client.post(LEASES, body(offer, count=2), format="json")
    with django_assert_max_num_queries(8):
        response = client.get(LEASES)
    assert len(response.json()["results"]) == 4
    assert Decimal(response.json()["results"][0]["price_per_gpu_hour"]) == Decimal("2.40")
    assert response.json()["results"][0]["status"] == LeaseStatus.ACTIVE


def test_quote_then_hold_then_lease_keeps_the_quoted_price(client_for, provider, customer):
    make_pool(provider)
    client = client_for(customer)
    start = next_hour()
    quotes = client.post(
        "/api/v1/quotes/",
        {"gpu_model": "h200-sxm", "gpu_count": 4, "start": start.isoformat(), "hours": 10},
        format="json",
    )
    assert quotes.status_code == 201, quotes.json()
    quote_id = quotes.json()["quotes"][0]["id"]
    hold = client.post(HOLDS, {"quote": quote_id}, format="json")
    assert hold.status_code == 201, hold.json()
    lease = client.post(LEASES, {"hold": hold.json()["id"]}, format="json")
    assert lease.status_code == 201, lease.json()
    assert lease.json()["price_per_gpu_hour"] == "2.400000"
    assert lease.json()["gpu_count"] == 4


def test_an_expired_quote_cannot_be_held_or_leased(client_for, provider, customer):
    make_pool(provider)
    client = client_for(customer)
    client.post(
        "/api/v1/quotes/",
        {"gpu_model": "h200-sxm", "gpu_count": 1, "start": next_hour().isoformat(), "hours": 2},
        format="json",
    )
    quote = Quote.objects.get()
    Quote.objects.filter(pk=quote.pk).update(expires_at=quote.created_at)
    for path, data in ((HOLDS, {"quote": quote.pk}), (LEASES, {"quote": quote.pk})):
        response = client.post(path, data, format="json")
        assert response.status_code == 409
        assert response.json()["code"] == "quote_expired"
    assert Allocation.objects.count() == 0


def test_a_lease_ends_early_through_its_contract_exit_terms(client_for, provider, customer):
    offer, _ = make_pool(provider, contract_template=[EXIT_3_MONTHS])
    client = client_for(customer)
    start = next_hour()
    lease = client.post(
        LEASES,
        {"offer": offer.pk, "gpu_count": 2, "start": start.isoformat(), "hours": 24 * 200},
        format="json",
    ).json()
    exit_date = (start + timedelta(days=60)).date()
    response = client.post(
        f"{LEASES}{lease['id']}/exit", {"exit_date": exit_date.isoformat()}, format="json"
    )
    assert response.status_code == 200, response.json()
    ended_at = response.json()["end"]
    # 30 days' notice for the lessee: the exit date (day 60) is past it, so that is the end.
    assert ended_at.startswith(exit_date.isoformat())
    assert all(
        row["end"] == ended_at.replace("Z", "+00:00") for row in response.json()["allocations"]
    )
    contract = Lease.objects.get(pk=lease["id"]).contract
    assert contract.status == ContractStatus.NOTICE_GIVEN
    assert contract.events.filter(kind=EventKind.EXIT_FEE).exists()
