"""Cost-attribution tags on holds and leases: set at creation through the API, shown, kept.

A lease made from a hold takes the hold's tags unless the request brings its own; bad tags are
a 400 `invalid_tags` that books nothing; the database refuses bad tags written any other way.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from leasing.models import Allocation, Hold, Lease, LeaseEvent, SlaSubscription
from tests.billing.factories import token_contract
from tests.leasing.factories import make_sla_offering
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
HOLDS = "/api/v1/holds/"
SUBSCRIPTION_ADD = "/admin/leasing/slasubscription/add/"


def window(offer, count=2, **extra):
    return {
        "offer": offer.pk,
        "gpu_count": count,
        "start": next_hour().isoformat(),
        "hours": 24,
        **extra,
    }


def test_a_lease_is_created_with_tags_and_shows_them(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=1)
    client = client_for(customer)
    tags = {"team": "search", "project": "rerank-v2", "cost-centre": "CC 4711"}
    response = client.post(LEASES, window(offer, tags=tags), format="json")
    assert response.status_code == 201, response.content
    assert response.json()["tags"] == dict(sorted(tags.items()))
    lease = Lease.objects.get(pk=response.json()["id"])
    assert lease.tags == tags
    created = LeaseEvent.objects.get(lease=lease, kind="created")
    assert created.inputs["tags"] == tags  # the audit row says which tags it started with
    listed = client.get(LEASES).json()["results"]
    assert listed[0]["tags"] == dict(sorted(tags.items()))


def test_a_lease_from_a_hold_takes_the_holds_tags_unless_it_brings_its_own(
    client_for, provider, customer
):
    offer, _ = make_pool(provider, nodes=2)
    client = client_for(customer)
    first = client.post(HOLDS, window(offer, tags={"team": "ads"}), format="json")
    second = client.post(HOLDS, window(offer, tags={"team": "ads"}), format="json")
    assert first.status_code == second.status_code == 201, (first.content, second.content)
    assert first.json()["tags"] == {"team": "ads"}
    inherited = client.post(LEASES, {"hold": first.json()["id"]}, format="json")
    assert inherited.status_code == 201, inherited.content
    assert inherited.json()["tags"] == {"team": "ads"}
    own = client.post(
        LEASES, {"hold": second.json()["id"], "tags": {"team": "search"}}, format="json"
    )
    assert own.status_code == 201, own.content
    assert own.json()["tags"] == {"team": "search"}


@pytest.mark.parametrize(
    "tags",
    [
        {"Team": "search"},
        {"team": ""},
        {"team": " search"},
        {"team": "a" * 65},
        {"t" * 33: "x"},
        {f"k{i}": "v" for i in range(11)},
        {"team": "line\nbreak"},
        {"team": "=cmd()"},
    ],
)
def test_bad_tags_are_400_and_book_nothing(client_for, provider, customer, tags):
    offer, _ = make_pool(provider, nodes=1)
    client = client_for(customer)
    for url in (LEASES, HOLDS):
        response = client.post(url, window(offer, tags=tags), format="json")
        assert response.status_code == 400, (url, response.content)
        assert response.json()["code"] == "invalid_tags", response.json()
    assert not Allocation.objects.exists()
    assert not Lease.objects.exists() and not Hold.objects.exists()


def test_the_database_refuses_bad_tags_on_leases_and_holds(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=1)
    client = client_for(customer)
    client.post(LEASES, window(offer, count=1), format="json")
    client.post(HOLDS, window(offer, count=1), format="json")
    for model in (Lease, Hold):
        for bad in ({"Team": "x"}, {"team": 5}, ["team"], {f"k{i}": "v" for i in range(11)}):
            with pytest.raises(IntegrityError), transaction.atomic():
                model.objects.update(tags=bad)
        model.objects.update(tags={"team": "ok", "project": "p.1/x"})  # within the limits


def test_the_admin_links_a_subscription_with_tags_and_its_frozen_tier_prices(
    admin_client, provider, customer
):
    offering = make_sla_offering(
        provider,
        price_per_million_cached_input_tokens=Decimal("0.10"),
        batch_price_per_million_input_tokens=Decimal("0.25"),
        batch_price_per_million_output_tokens=Decimal("0.75"),
        batch_completion_hours=24,
    )
    contract = token_contract(provider, customer)
    refused = admin_client.post(
        SUBSCRIPTION_ADD,
        {"offering": offering.pk, "contract": contract.pk, "tags": '{"Team": "search"}'},
    )
    assert refused.status_code == 200
    form = refused.context["adminform"].form
    assert any("Tag key 'Team'" in message for message in form.errors.get("tags", [])) or any(
        "Tag key 'Team'" in message for message in form.non_field_errors()
    ), form.errors
    assert not SlaSubscription.objects.exists()
    response = admin_client.post(
        SUBSCRIPTION_ADD,
        {"offering": offering.pk, "contract": contract.pk, "tags": '{"team": "search"}'},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    subscription = SlaSubscription.objects.get()
    assert subscription.tags == {"team": "search"}
    assert subscription.batch_completion_hours == 24
    assert subscription.price_per_million_cached_input_tokens == Decimal("0.10")
    page = admin_client.get(f"/admin/leasing/slasubscription/{subscription.pk}/change/")
    assert page.status_code == 200 and "search" in page.content.decode()
