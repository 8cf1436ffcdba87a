"""Resale listings that reach their window unsold expire (beat task); a quote with no ordinary
capacity answers with the open resale listings that serve it."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from leasing.models import Allocation, LeaseEvent, ResaleListing
from leasing.tasks import expire_resale_listings
from tests.leasing.resale_helpers import (
    LISTINGS,
    listing_body,
    midnight_in,
    resale_offer,
    reserved_lease,
)

pytestmark = pytest.mark.django_db

QUOTES = "/api/v1/quotes/"


@pytest.fixture
def seller(client_for, customer):
    return client_for(customer)


@pytest.fixture
def buyer(client_for, other_customer):
    return client_for(other_customer)


def _listed(client, lease, **kwargs):
    response = client.post(LISTINGS, listing_body(lease, **kwargs), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _live_rows(listing_id: int) -> int:
    return Allocation.objects.filter(listing_id=listing_id, released_at__isnull=True).count()


def test_unsold_listings_whose_window_began_expire_and_release_their_time(
    seller, buyer, provider, client_for
):
    offer = resale_offer(provider, gpu_count=8, provider_consent_required=True)
    lease = reserved_lease(seller, offer, count=4)
    opened = _listed(seller, lease, count=1, start=midnight_in(2))
    sold = _listed(seller, lease, count=1, start=midnight_in(2))
    pending = _listed(seller, lease, count=1, start=midnight_in(2))
    later = _listed(seller, lease, count=1, start=midnight_in(4))
    for each in (opened, sold, later):
        consented = client_for(provider).post(f"{LISTINGS}{each['id']}/consent/")
        assert consented.status_code == 200, consented.json()
    assert buyer.post(f"{LISTINGS}{sold['id']}/buy/").status_code == 201

    with time_machine.travel(midnight_in(2) - timedelta(minutes=1), tick=False):
        assert expire_resale_listings.apply().get() == 0  # not yet begun

    with time_machine.travel(midnight_in(2) + timedelta(minutes=3), tick=False):
        assert expire_resale_listings.apply().get() == 2
        assert expire_resale_listings.apply().get() == 0  # idempotent

    listings = ResaleListing.objects.in_bulk([opened["id"], sold["id"], later["id"], pending["id"]])
    assert {pk: row.status for pk, row in listings.items()} == {
        opened["id"]: "expired",
        sold["id"]: "sold",
        later["id"]: "open",
        pending["id"]: "expired",
    }
    for each in (opened, pending):
        assert listings[each["id"]].closed_at is not None
        assert _live_rows(each["id"]) == 0
    assert listings[later["id"]].closed_at is None
    assert _live_rows(later["id"]) == 1
    assert _live_rows(sold["id"]) == 1  # the buyer's GPU-time is untouched
    events = LeaseEvent.objects.filter(kind="resale_withdrawn", inputs__to="expired")
    assert sorted(event.inputs["listing_id"] for event in events) == sorted(
        [opened["id"], pending["id"]]
    )
    assert {event.lease_id for event in events} == {lease["id"]}
    # An expired listing is closed for good.
    again = seller.post(f"{LISTINGS}{opened['id']}/withdraw/")
    assert (again.status_code, again.json()["code"]) == (409, "listing_closed")


def _quote(client, *, count: int, **extra):
    body = {
        **extra,
        "gpu_model": "h200-sxm",
        "gpu_count": count,
        "start": (midnight_in(2) + timedelta(hours=6)).isoformat(),
        "hours": 12,
        "pricing_mode": "on_demand",
    }
    return client.post(QUOTES, body, format="json")


def test_a_quote_without_ordinary_capacity_answers_with_the_resale_offers(seller, buyer, provider):
    lease = reserved_lease(seller, resale_offer(provider, gpu_count=4), count=4)
    listing = _listed(seller, lease, count=2, hours=48)
    response = _quote(buyer, count=2)
    assert response.status_code == 201, response.json()
    assert response.json()["quotes"] == []
    [resale] = response.json()["resale"]
    assert (resale["listing"], resale["offer_type"]) == (listing["id"], "resale")
    # Neither ordinary capacity nor a listing large enough: still 409 no_capacity.
    refused = _quote(buyer, count=3)
    assert (refused.status_code, refused.json()["code"]) == (409, "no_capacity")
    # The seller cannot buy its own listing, so it gets the 409 too.
    own = _quote(seller, count=2)
    assert (own.status_code, own.json()["code"]) == (409, "no_capacity")


def test_the_resale_offers_of_a_quote_follow_its_country(seller, buyer, provider):
    offer = resale_offer(provider, gpu_count=4)
    lease = reserved_lease(seller, offer, count=4)
    listing = _listed(seller, lease, count=2, hours=48)
    country = offer.site.country
    elsewhere = "NZ" if country != "NZ" else "AU"
    here = _quote(buyer, count=2, country=country.lower())
    assert here.status_code == 201, here.json()
    assert [offer["listing"] for offer in here.json()["resale"]] == [listing["id"]]
    # In another country the listing is no offer: no ordinary capacity there either, so 409.
    there = _quote(buyer, count=2, country=elsewhere)
    assert (there.status_code, there.json()["code"]) == (409, "no_capacity")
