"""Races on resold time: many buyers, each on its own connection, for one listing."""

from __future__ import annotations

from collections import Counter

import pytest

from leasing.models import Allocation, Lease, ResaleListing
from tests.factories import OrganizationFactory
from tests.leasing.resale_helpers import (
    LISTINGS,
    listing_body,
    overlapping_nested_pairs,
    resale_offer,
    reserved_lease,
)
from tests.leasing.test_lease_concurrency import race
from tests.leasing.test_leases_api import overlapping_pairs

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_32_buyers_racing_for_one_listing_make_exactly_one_sale(client_for, provider, customer):
    seller = client_for(customer)
    lease = reserved_lease(seller, resale_offer(provider, gpu_count=4), count=4)
    listing = seller.post(LISTINGS, listing_body(lease, count=4), format="json").json()
    buyers = [client_for(OrganizationFactory()) for _ in range(32)]
    responses = race(buyers, lambda client, i: client.post(f"{LISTINGS}{listing['id']}/buy/"))
    codes = Counter(response.status_code for response in responses)
    assert codes == {201: 1, 409: 31}, [r.json() for r in responses if r.status_code >= 500]
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {
        "listing_not_available"
    }
    assert Lease.objects.filter(parent_lease_id=lease["id"]).count() == 1
    sold = ResaleListing.objects.get(pk=listing["id"])
    assert sold.status == "sold"
    assert Allocation.objects.filter(lease=sold.sublease, released_at__isnull=True).count() == 4
    # In SQL: no two live top-level rows overlap, no two live nested rows overlap.
    assert overlapping_nested_pairs() == 0
    assert overlapping_pairs() == 4  # each nested row lies inside its own parent, nothing else


def test_two_listings_of_the_same_gpu_time_at_once_make_one(client_for, provider, customer):
    seller = client_for(customer)
    lease = reserved_lease(seller, resale_offer(provider, gpu_count=2), count=2)
    clients = [client_for(customer) for _ in range(4)]
    responses = race(
        clients,
        lambda client, i: client.post(LISTINGS, listing_body(lease, count=2), format="json"),
    )
    codes = Counter(response.status_code for response in responses)
    assert codes == {201: 1, 409: 3}, [r.json() for r in responses]
    assert overlapping_nested_pairs() == 0
