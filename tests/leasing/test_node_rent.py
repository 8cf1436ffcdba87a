"""Whole-server monthly rent through the API: node_month offers, whole-node leases, their
contracts, the reserved ladder on the rent, and the database's own guards."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from contracts.models import Contract
from leasing.models import Lease, Offer
from tests.leasing.factories import make_nodes, make_offer, make_provider_site
from tests.leasing.pool import next_hour

pytestmark = pytest.mark.django_db

OFFERS = "/api/v1/offers/"
LEASES = "/api/v1/leases/"


def rent_offer(provider, *, nodes=2, **terms):
    return make_offer(
        provider,
        nodes=nodes,
        price_unit="node_month",
        price_per_node_month=Decimal("30000"),
        interruptible_price_per_gpu_hour=None,
        **terms,
    )


def lease_body(offer, count, **extra):
    return {
        "offer": offer.pk,
        "gpu_count": count,
        "start": next_hour().isoformat(),
        "hours": 24 * 40,
        **extra,
    }


def test_a_provider_publishes_a_node_month_offer(client_for, provider):
    site = make_provider_site(provider)
    make_nodes(site, gpu_model_slug="h200-sxm", count=1, gpus_per_node=8)
    response = client_for(provider).post(
        OFFERS,
        {
            "site": site.pk,
            "gpu_model": "h200-sxm",
            "name": "H200 servers by the month",
            "price_per_gpu_hour": "2.40",
            "price_unit": "node_month",
            "price_per_node_month": "14500.00",
            "currency": "USD",
            "reserved_ladder": {"12": "10"},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    offer = Offer.objects.get(pk=response.json()["id"])
    assert (offer.price_unit, offer.price_per_node_month) == ("node_month", Decimal("14500"))


@pytest.mark.parametrize(
    ("overrides", "field", "code"),
    [
        ({"price_unit": "node_month"}, "price_per_node_month", "node_month_price_required"),
        ({"price_per_node_month": "100"}, "price_per_node_month", "node_month_price_without_unit"),
        (
            {"price_unit": "node_month", "price_per_node_month": "0"},
            "price_per_node_month",
            "price_not_positive",
        ),
        (
            {
                "price_unit": "node_month",
                "price_per_node_month": "100",
                "interruptible_price_per_gpu_hour": "1.10",
            },
            "interruptible_price_per_gpu_hour",
            "node_month_not_interruptible",
        ),
    ],
)
def test_inconsistent_node_month_prices_are_refused(client_for, provider, overrides, field, code):
    site = make_provider_site(provider)
    body = {
        "site": site.pk,
        "gpu_model": "h200-sxm",
        "name": "bad",
        "price_per_gpu_hour": "2.40",
        "currency": "USD",
        **overrides,
    }
    response = client_for(provider).post(OFFERS, body, format="json")
    assert response.status_code == 400, response.json()
    assert code in str(response.json()) and field in str(response.json())
    assert not Offer.objects.filter(name="bad").exists()


def test_a_lease_of_part_of_a_server_is_422_not_whole_nodes(client_for, provider, customer):
    offer = rent_offer(provider)
    response = client_for(customer).post(LEASES, lease_body(offer, 12), format="json")
    assert response.status_code == 422, response.json()
    assert response.json()["code"] == "not_whole_nodes"
    assert response.json()["detail"] == {"gpu_count": 12, "gpus_per_node": 8}
    assert not Lease.objects.exists()


def test_a_whole_server_lease_carries_the_rent_on_lease_and_contract(
    client_for, provider, customer
):
    offer = rent_offer(provider)
    response = client_for(customer).post(LEASES, lease_body(offer, 16), format="json")
    assert response.status_code == 201, response.json()
    lease = Lease.objects.get(pk=response.json()["id"])
    assert lease.price_per_node_month == Decimal("30000")
    assert lease.price_per_gpu_hour == 0
    contract = lease.contract
    assert (contract.rent_per_node_month, contract.rented_nodes) == (Decimal("30000"), 2)
    assert contract.base_rate_per_gpu_hour == 0
    # Every GPU of both servers is the lessee's.
    nodes = {a.node_id for a in lease.allocations.all()}
    assert len(nodes) == 2 and lease.allocations.count() == 16
    created = lease.events.get(kind="created")
    assert "monthly rent 30000 USD per node, 2 whole nodes" in created.explanation


def test_the_reserved_ladder_discounts_the_monthly_rent(client_for, provider, customer):
    offer = rent_offer(provider, nodes=1)  # ladder {"1": "5", "3": "10", "12": "25"}
    response = client_for(customer).post(
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": 8,
            "start": next_hour().isoformat(),
            "pricing_mode": "reserved",
            "term_months": 12,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    lease = Lease.objects.get(pk=response.json()["id"])
    assert lease.price_per_node_month == Decimal("22500")  # 30,000 less 25 %
    assert lease.contract.rent_per_node_month == Decimal("22500")


def test_no_index_linked_or_interruptible_rent(client_for, provider, customer):
    offer = rent_offer(provider, nodes=1)
    client = client_for(customer)
    response = client.post(
        LEASES, lease_body(offer, 8, pricing_mode="interruptible"), format="json"
    )
    assert response.status_code == 422 and response.json()["code"] == "no_interruptible_capacity"
    response = client.post(LEASES, lease_body(offer, 8, price_basis="index_linked"), format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "node_month_fixed_only"
    assert not Lease.objects.exists()


def test_a_busy_gpu_leaves_no_whole_server_free(client_for, provider, customer):
    offer = rent_offer(provider, nodes=1)
    gpu_offer = make_offer(provider, nodes=offer.pool_nodes, name_nodes=True)
    client = client_for(customer)
    start = next_hour()
    assert (
        client.post(
            LEASES,
            {"offer": gpu_offer.pk, "gpu_count": 1, "start": start.isoformat(), "hours": 24},
            format="json",
        ).status_code
        == 201
    )
    response = client.post(
        LEASES,
        {"offer": offer.pk, "gpu_count": 8, "start": start.isoformat(), "hours": 24 * 40},
        format="json",
    )
    assert response.status_code == 409, response.json()
    assert response.json()["code"] in {"capacity_gone", "no_whole_node_free"}
    assert Lease.objects.count() == 1


def test_the_database_refuses_inconsistent_rent_fields(client_for, provider, customer):
    offer = rent_offer(provider, nodes=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Offer.objects.filter(pk=offer.pk).update(price_per_node_month=None)
    with pytest.raises(IntegrityError), transaction.atomic():
        Offer.objects.filter(pk=offer.pk).update(price_unit="gpu_hour")
    with pytest.raises(IntegrityError), transaction.atomic():
        Offer.objects.filter(pk=offer.pk).update(price_per_node_month=Decimal("-1"))
    response = client_for(customer).post(LEASES, lease_body(offer, 8), format="json")
    lease = Lease.objects.get(pk=response.json()["id"])
    with pytest.raises(IntegrityError), transaction.atomic():
        Lease.objects.filter(pk=lease.pk).update(price_per_gpu_hour=Decimal("2.40"))
    with pytest.raises(IntegrityError), transaction.atomic():
        Contract.objects.filter(pk=lease.contract_id).update(rent_per_node_month=None)
    with pytest.raises(IntegrityError), transaction.atomic():
        Contract.objects.filter(pk=lease.contract_id).update(rented_nodes=0)


def test_capacity_search_leaves_node_month_offers_out(client_for, provider, customer):
    rented = rent_offer(provider, nodes=1)
    hourly = make_offer(provider, nodes=1)
    start = next_hour()
    response = client_for(customer).get(
        "/api/v1/capacity/",
        {"start": start.isoformat(), "end": (start + timedelta(hours=24)).isoformat()},
    )
    assert response.status_code == 200, response.json()
    found = {row["offer"]["id"] for row in response.json()["results"]}
    assert hourly.pk in found and rented.pk not in found
