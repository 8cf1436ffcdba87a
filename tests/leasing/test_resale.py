"""Resale of leased time through the API: listing, consent, withdrawal, search, buying, and what
the parent lease may still do to sold time."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from contracts.choices import EventKind
from contracts.models import ContractEvent
from leasing.models import Allocation, Lease, ResaleListing
from tests.leasing.pool import next_hour
from tests.leasing.resale_helpers import (
    LEASES,
    LISTINGS,
    listing_body,
    midnight_in,
    overlapping_nested_pairs,
    resale_offer,
    reserved_lease,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def seller(client_for, customer):
    return client_for(customer)


@pytest.fixture
def buyer(client_for, other_customer):
    return client_for(other_customer)


def _list(client, lease, **kwargs):
    return client.post(LISTINGS, listing_body(lease, **kwargs), format="json")


def _listed(client, lease, **kwargs):
    response = _list(client, lease, **kwargs)
    assert response.status_code == 201, response.json()
    return response.json()


# ---------------------------------------------------------------- listing


def test_a_lease_whose_contract_has_no_assignment_clause_cannot_be_resold(seller, provider):
    lease = reserved_lease(seller, resale_offer(provider, with_assignment=False))
    response = _list(seller, lease)
    assert response.status_code == 422
    assert response.json()["code"] == "resale_not_allowed"


def test_a_clause_with_resale_not_allowed_refuses_too(seller, provider):
    lease = reserved_lease(seller, resale_offer(provider, resale_allowed=False))
    assert _list(seller, lease).json()["code"] == "resale_not_allowed"


def test_an_on_demand_lease_cannot_be_resold(seller, provider):
    offer = resale_offer(provider)
    body = {"offer": offer.pk, "gpu_count": 2, "start": next_hour().isoformat(), "hours": 200}
    lease = seller.post(LEASES, body, format="json").json()
    assert _list(seller, lease).json()["code"] == "resale_not_allowed"


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"start": "past"}, 400, "window_in_past"),
        ({"start": "after_lease"}, 422, "window_outside_lease"),
        ({"hours": 1}, 422, "resale_window_too_short"),
        ({"ask": "1.00"}, 422, "ask_below_floor"),
        ({"currency": "EUR"}, 422, "currency_mismatch"),
        ({"count": 5}, 409, "resale_gpus_unavailable"),
    ],
)
def test_a_listing_that_breaks_a_rule_is_refused_with_a_stable_code(
    seller, provider, change, status, code
):
    lease = reserved_lease(seller, resale_offer(provider), count=4)
    if change.get("start") == "past":
        change = {"start": next_hour(-3)}
    elif change.get("start") == "after_lease":
        change = {"start": midnight_in(40)}
    response = _list(seller, lease, **change)
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert not ResaleListing.objects.exists()


def test_the_floor_is_the_clause_percentage_of_the_contract_rate(seller, provider):
    lease = reserved_lease(seller, resale_offer(provider))
    response = _list(seller, lease, ask="0.01")
    rate = Decimal(lease["price_per_gpu_hour"])
    assert Decimal(response.json()["detail"]["floor_rate"]) == (rate * Decimal("0.8")).quantize(
        Decimal("0.000001")
    )


def test_a_listing_reserves_its_gpu_time_so_the_same_time_cannot_be_listed_twice(seller, provider):
    lease = reserved_lease(seller, resale_offer(provider), count=4)
    first = _listed(seller, lease, count=3)
    assert first["status"] == "open"
    assert first["offer_type"] == "resale"
    assert Allocation.objects.filter(listing_id=first["id"], parent__isnull=False).count() == 3
    again = _list(seller, lease, count=2, start=midnight_in(2) + timedelta(hours=12))
    assert again.status_code == 409
    assert again.json()["detail"] == {"available": 1, "requested": 2}
    # Another window of the same GPUs is fine.
    _listed(seller, lease, count=4, start=midnight_in(5))
    assert overlapping_nested_pairs() == 0


def test_other_tenants_do_not_see_a_listing_but_its_provider_does(
    seller, provider, other_provider, client_for
):
    lease = reserved_lease(seller, resale_offer(provider))
    listing = _listed(seller, lease)
    assert [row["id"] for row in client_for(provider).get(LISTINGS).json()["results"]] == [
        listing["id"]
    ]
    assert client_for(other_provider).get(LISTINGS).json()["results"] == []
    assert client_for(other_provider).get(f"{LISTINGS}{listing['id']}/").status_code == 404


# ---------------------------------------------------------------- withdraw and consent


def test_the_seller_withdraws_an_unsold_listing_and_gets_its_time_back(seller, provider):
    lease = reserved_lease(seller, resale_offer(provider), count=2)
    listing = _listed(seller, lease, count=2)
    response = seller.post(f"{LISTINGS}{listing['id']}/withdraw/")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "withdrawn"
    assert not Allocation.objects.filter(listing_id=listing["id"], released_at__isnull=True)
    again = seller.post(f"{LISTINGS}{listing['id']}/withdraw/")
    assert (again.status_code, again.json()["code"]) == (409, "listing_closed")
    _listed(seller, lease, count=2)  # the same time can be listed again


def test_a_listing_that_needs_consent_is_not_buyable_until_the_provider_consents(
    seller, buyer, provider, client_for
):
    lease = reserved_lease(seller, resale_offer(provider, provider_consent_required=True))
    listing = _listed(seller, lease)
    assert listing["status"] == "pending_consent"
    url = f"{LISTINGS}{listing['id']}/"
    assert buyer.post(f"{url}buy/").status_code == 404
    refused = seller.post(f"{url}consent/")
    assert (refused.status_code, refused.json()["code"]) == (403, "provider_only")
    consented = client_for(provider).post(f"{url}consent/")
    assert consented.status_code == 200, consented.json()
    assert consented.json()["status"] == "open"
    assert buyer.post(f"{url}buy/").status_code == 201


# ---------------------------------------------------------------- search and quotes


def test_capacity_search_and_quotes_show_an_open_listing_marked_resale(seller, buyer, provider):
    offer = resale_offer(provider, gpu_count=4)
    lease = reserved_lease(seller, offer, count=4)
    listing = _listed(seller, lease, count=2, ask="2.50", hours=48)
    start = midnight_in(2) + timedelta(hours=6)
    query = {"gpu_model": "h200-sxm", "start": start.isoformat(), "hours": 12}
    page = buyer.get("/api/v1/capacity/", query)
    assert page.status_code == 200, page.json()
    body = page.json()
    assert body["results"] == []  # the pool is fully leased: no ordinary capacity
    [resale] = body["resale"]
    assert resale["offer_type"] == "resale"
    assert resale["listing"] == listing["id"]
    assert resale["gpu_count"] == 2
    assert resale["price_per_gpu_hour"] == "2.500000"
    assert Decimal(resale["total"]) == Decimal("240.00")  # 2 GPUs x 48 h x 2.50
    # The seller does not see its own listing as an offer.
    assert seller.get("/api/v1/capacity/", query).json()["resale"] == []


def test_a_quote_lists_resale_offers_beside_the_quotes(seller, buyer, provider):
    offer = resale_offer(provider, gpu_count=8)
    lease = reserved_lease(seller, offer, count=4)
    listing = _listed(seller, lease, count=2, hours=48)
    body = {
        "gpu_model": "h200-sxm",
        "gpu_count": 2,
        "start": (midnight_in(2) + timedelta(hours=1)).isoformat(),
        "hours": 24,
        "pricing_mode": "on_demand",
    }
    response = buyer.post("/api/v1/quotes/", body, format="json")
    assert response.status_code == 201, response.json()
    assert [row["listing"] for row in response.json()["resale"]] == [listing["id"]]
    assert response.json()["resale"][0]["offer_type"] == "resale"


# ---------------------------------------------------------------- buying


def test_buying_a_listing_creates_a_sublease_nested_in_the_sellers_allocations(
    seller, buyer, provider, other_customer
):
    offer = resale_offer(provider, gpu_count=4)
    lease = reserved_lease(seller, offer, count=4)
    listing = _listed(seller, lease, count=2, ask="2.50")
    capacity_before = buyer.get(
        "/api/v1/capacity/", {"start": midnight_in(2).isoformat(), "hours": 4}
    ).json()["results"]
    parent_rows_before = list(
        Allocation.objects.filter(lease_id=lease["id"]).values_list("pk", "period")
    )

    response = buyer.post(f"{LISTINGS}{listing['id']}/buy/")
    assert response.status_code == 201, response.json()
    sub = response.json()
    assert sub["customer"] == other_customer.slug
    assert sub["gpu_count"] == 2
    assert sub["price_per_gpu_hour"] == "2.500000"
    sublease = Lease.objects.get(pk=sub["id"])
    assert sublease.parent_lease_id == lease["id"]
    assert sublease.resale_listing.pk == listing["id"]
    # Exactly the listed GPU-time, nested in the seller's rows, which did not change.
    for row in sublease.allocations.select_related("parent"):
        assert row.parent is not None and row.parent.lease_id == lease["id"]
        assert row.gpu_id == row.parent.gpu_id
        assert row.period.lower == midnight_in(2)
        assert row.period.upper == midnight_in(3)
    assert (
        list(Allocation.objects.filter(lease_id=lease["id"]).values_list("pk", "period"))
        == parent_rows_before
    )
    # The buyer's own contract: the ask, the pass-through clauses, and the assignment facts.
    contract = sublease.contract
    assert contract.base_rate_per_gpu_hour == Decimal("2.50")
    assert contract.lessor == provider
    assert sorted(contract.clauses.values_list("kind", flat=True)) == [
        "exit_terms",
        "sla_credits",
    ]
    facts = ContractEvent.objects.get(contract=contract, kind=EventKind.RESALE).inputs
    assert facts["parent_lease_id"] == lease["id"]
    assert facts["provider_share_pct"] == "10.0000"
    assert facts["marketplace_fee_pct"] == "5.0000"
    assert ContractEvent.objects.filter(
        contract_id=lease["contract_id"], kind=EventKind.RESALE
    ).exists()
    # Resold time is not extra occupancy: capacity search answers as before the sale.
    capacity_after = buyer.get(
        "/api/v1/capacity/", {"start": midnight_in(2).isoformat(), "hours": 4}
    ).json()["results"]
    assert capacity_after == capacity_before
    # Sold once: a second buyer is refused; withdrawing a sold listing too.
    second = buyer.post(f"{LISTINGS}{listing['id']}/buy/")
    assert (second.status_code, second.json()["code"]) == (409, "listing_not_available")
    withdrawn = seller.post(f"{LISTINGS}{listing['id']}/withdraw/")
    assert withdrawn.status_code == 409
    assert overlapping_nested_pairs() == 0


def test_the_seller_cannot_buy_its_own_listing(seller, provider):
    lease = reserved_lease(seller, resale_offer(provider))
    listing = _listed(seller, lease)
    response = seller.post(f"{LISTINGS}{listing['id']}/buy/")
    assert (response.status_code, response.json()["code"]) == (422, "own_listing")


# ---------------------------------------------------------------- the database's own guard


def _nested_row(parent: Allocation, listing_id: int, *, start, end, gpu_id=None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO leasing_allocation
              (gpu_id, node_id, parent_id, listing_id, period, preemptible, ended_reason,
               created_at)
            VALUES (%s, %s, %s, %s, tstzrange(%s, %s, '[)'), false, '', now())
            """,
            [gpu_id or parent.gpu_id, parent.node_id, parent.pk, listing_id, start, end],
        )


def test_the_database_refuses_overlapping_or_misplaced_nested_rows(seller, provider):
    lease = reserved_lease(seller, resale_offer(provider), count=2)
    listing = _listed(seller, lease, count=1)
    nested = Allocation.objects.get(listing_id=listing["id"])
    parent = nested.parent
    other = Allocation.objects.filter(lease_id=lease["id"]).exclude(pk=parent.pk).get()
    start, end = nested.period.lower, nested.period.upper
    attempts = {
        "overlap": dict(start=start + timedelta(hours=1), end=end + timedelta(hours=1)),
        "another gpu": dict(start=end, end=end + timedelta(hours=2), gpu_id=other.gpu_id),
        "outside its parent": dict(start=parent.period.upper - timedelta(hours=1),
                                   end=parent.period.upper + timedelta(hours=1)),
    }  # fmt: skip
    for name, attempt in attempts.items():
        with pytest.raises(IntegrityError), transaction.atomic():
            _nested_row(parent, listing["id"], **attempt)
        assert Allocation.objects.filter(listing_id=listing["id"]).count() == 1, name
    # The parent row cannot shrink below its resold time, nor be released under it.
    with pytest.raises(IntegrityError), transaction.atomic():
        parent.period = DateTimeTZRange(parent.period.lower, start, "[)")
        parent.save(update_fields=["period"])
    with pytest.raises(IntegrityError), transaction.atomic():
        Allocation.objects.filter(pk=parent.pk).update(released_at=start)
    # A nested row next to the listed one on the same GPU is fine.
    _nested_row(parent, listing["id"], start=end, end=end + timedelta(hours=2))


# ---------------------------------------------------------------- the parent lease changes


def _exit(client, lease, days):
    return client.post(
        f"{LEASES}{lease['id']}/exit/",
        {"exit_date": midnight_in(days).date().isoformat()},
        format="json",
    )


def _sold(seller, buyer, provider, rule, **listing):
    lease = reserved_lease(seller, resale_offer(provider, on_parent_end=rule), count=4)
    sold = _listed(seller, lease, **listing)
    sub = buyer.post(f"{LISTINGS}{sold['id']}/buy/").json()
    return lease, sold, Lease.objects.get(pk=sub["id"])


def test_a_parent_exit_into_sold_time_ends_the_sublease_there_under_end_with_refund(
    seller, buyer, provider
):
    # Sold from day 2 to day 4; the parent exits at day 3.
    lease, _, sublease = _sold(seller, buyer, provider, "end_with_refund", hours=48)
    response = _exit(seller, lease, 3)
    assert response.status_code == 200, response.json()
    sublease.refresh_from_db()
    assert sublease.end == midnight_in(3)
    assert sublease.contract.term_end == midnight_in(3)
    for row in sublease.allocations.all():
        assert row.parent_id is not None
        assert row.period.upper == midnight_in(3)
    event = ContractEvent.objects.get(
        contract=sublease.contract, dedupe_key__endswith=":parent_end"
    )
    assert event.inputs["rule"] == "end_with_refund"
    assert overlapping_nested_pairs() == 0


def test_a_parent_exit_before_the_sold_window_cancels_the_sublease_under_end_with_refund(
    seller, buyer, provider
):
    lease, _, sublease = _sold(seller, buyer, provider, "end_with_refund", start=midnight_in(5))
    assert _exit(seller, lease, 3).status_code == 200
    sublease.refresh_from_db()
    assert sublease.contract.status == "ended"
    assert sublease.status == "ended"
    assert not sublease.allocations.filter(released_at__isnull=True).exists()


def test_a_parent_exit_into_sold_time_detaches_the_sublease_under_continue_under_provider(
    seller, buyer, provider
):
    lease, _, sublease = _sold(seller, buyer, provider, "continue_under_provider", hours=48)
    assert _exit(seller, lease, 3).status_code == 200
    sublease.refresh_from_db()
    assert sublease.end == midnight_in(4)  # it runs on
    live = sublease.allocations.filter(released_at__isnull=True)
    nested = live.filter(parent__isnull=False)
    top = live.filter(parent__isnull=True)
    assert nested.count() == 2 and top.count() == 2
    assert {row.period.upper for row in nested} == {midnight_in(3)}
    assert {(row.period.lower, row.period.upper) for row in top} == {
        (midnight_in(3), midnight_in(4))
    }
    parent_rows = Allocation.objects.filter(lease_id=lease["id"], released_at__isnull=True)
    assert {row.period.upper for row in parent_rows} == {midnight_in(3)}
    assert overlapping_nested_pairs() == 0


def test_an_unsold_listing_past_the_parents_new_end_is_cancelled(seller, provider):
    lease = reserved_lease(seller, resale_offer(provider), count=2)
    listing = _listed(seller, lease, start=midnight_in(5))
    assert _exit(seller, lease, 3).status_code == 200
    assert ResaleListing.objects.get(pk=listing["id"]).status == "cancelled"


def test_swapping_a_gpu_whose_time_is_sold_answers_409_resold_time(
    seller, buyer, provider, client_for
):
    lease, sold, _ = _sold(seller, buyer, provider, "end_with_refund")
    gpu = Allocation.objects.filter(listing_id=sold["id"]).first().gpu_id
    response = client_for(provider).post(
        f"{LEASES}{lease['id']}/replace-gpu/", {"gpu": gpu}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (409, "resold_time")


def test_extending_a_parent_with_sold_time_is_fine(seller, buyer, provider):
    lease, _, _ = _sold(seller, buyer, provider, "end_with_refund")
    new_end = (Lease.objects.get(pk=lease["id"]).end + timedelta(days=2)).isoformat()
    response = seller.post(f"{LEASES}{lease['id']}/extend/", {"end": new_end}, format="json")
    assert response.status_code == 200, response.json()
