"""Cost-attribution tags on holds and leases: set at creation through the API, shown, kept.

A lease made from a hold takes the hold's tags unless the request brings its own; bad tags are
a 400 `invalid_tags` that books nothing; the database refuses bad tags written any other way.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from leasing.models import Allocation, Hold, Lease, LeaseEvent
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
HOLDS = "/api/v1/holds/"


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
