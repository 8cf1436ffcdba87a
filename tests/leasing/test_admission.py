"""Admission checks registered by higher layers refuse new holds and leases through the API with
their own code, leave nothing behind, and do not stand in the way of converting a hold."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.errors import Conflict
from leasing.admission import Admission, admission_check_register
from leasing.admission import _checks as registered
from leasing.models import Allocation, Hold, Lease
from tests.leasing.pool import make_pool, next_hour

SEEN: list[Admission] = []


def refuse_big_requests(admission: Admission) -> None:
    SEEN.append(admission)
    if admission.gpu_count > 2:
        raise Conflict("Too many GPUs for this test's rule.", code="test_rule_refused")


@pytest.fixture
def rule() -> Iterator[None]:
    SEEN.clear()
    admission_check_register("test_rule", refuse_big_requests)
    yield
    registered.pop("test_rule", None)


def body(offer, count):
    return {"offer": offer.pk, "gpu_count": count, "start": next_hour().isoformat(), "hours": 24}


@pytest.mark.django_db
def test_a_refusing_check_stops_holds_and_leases_and_leaves_nothing(
    rule, client_for, provider, customer
):
    offer, _ = make_pool(provider, nodes=1, gpu_count=8)
    client = client_for(customer)
    for path in ("/api/v1/holds/", "/api/v1/leases/"):
        refused = client.post(path, body(offer, 3), format="json")
        assert (refused.status_code, refused.json()["code"]) == (409, "test_rule_refused")
    assert not Hold.objects.exists() and not Lease.objects.exists()
    assert not Allocation.objects.exists()
    assert [(a.customer, a.gpu_count, a.pricing_mode) for a in SEEN] == [
        (customer, 3, "on_demand"),
        (customer, 3, "on_demand"),
    ]


@pytest.mark.django_db
def test_an_admitted_hold_converts_without_being_asked_again(rule, client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=1, gpu_count=8)
    client = client_for(customer)
    hold = client.post("/api/v1/holds/", body(offer, 2), format="json")
    assert hold.status_code == 201, hold.json()
    lease = client.post("/api/v1/leases/", {"hold": hold.json()["id"]}, format="json")
    assert lease.status_code == 201, lease.json()
    assert len(SEEN) == 1
