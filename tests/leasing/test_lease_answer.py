"""The plain-SQL reads of the lease creation path (docs/architecture.md, "Request path costs")
give what the ORM reads they replaced gave: the answer to a new lease is the lease as read back
through the lease list's queryset, and an offer is visible to exactly the callers offers_visible
lets read it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from accounts.selectors import Caller
from leasing.choices import OfferStatus
from leasing.models import Offer
from leasing.selectors import offers_visible
from leasing.selectors.visibility import offer_visible
from tests.leasing.pool import make_pool

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def body(offer: Offer, count: int, *, hours: int = 4, **extra: Any) -> dict[str, Any]:
    return {"offer": offer.pk, "gpu_count": count, "start": T0.isoformat(), "hours": hours, **extra}


def test_the_answer_to_a_new_lease_is_the_lease_as_read_back(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider, nodes=2)
    cheap_client, client = client_for(other_customer), client_for(customer)
    requests = [
        # Interruptible, tagged, on one node.
        (cheap_client, body(offer, 8, hours=24, pricing_mode="interruptible", tags={"team": "a"})),
        # On two nodes: the free node and a cut of the interruptible one (GPUs ready later).
        (client, body(offer, 12, workload="training")),
        # Reserved for a month.
        (
            client,
            {
                "offer": offer.pk,
                "gpu_count": 2,
                "start": (T0 + timedelta(days=3)).isoformat(),
                "pricing_mode": "reserved",
                "term_months": 1,
            },
        ),
    ]
    created = []
    with time_machine.travel(T0, tick=False):
        for caller_client, request in requests:
            response = caller_client.post(LEASES, request, format="json")
            assert response.status_code == 201, response.json()
            answer = response.json()
            # Read back before the next lease changes it (the second cuts the first).
            assert answer == caller_client.get(f"{LEASES}{answer['id']}/").json()
            created.append(response)
    preempting = created[1].json()
    assert preempting["placement"] == "multi_node"
    assert preempting["gpus_ready_at"] != preempting["start"]
    assert len(preempting["allocations"]) == 12
    assert created[0].json()["tags"] == {"team": "a"}


def test_an_offer_is_visible_to_the_callers_offers_visible_lets_read_it(
    provider, other_provider, customer, operator
):
    published, nodes = make_pool(provider, nodes=2)
    published.nodes.set([nodes[1]])  # named nodes: read with the offer
    paused, _ = make_pool(other_provider, status=OfferStatus.PAUSED)
    callers = [
        Caller(customer, is_operator=False, can_write=True),
        Caller(provider, is_operator=False, can_write=True),
        Caller(other_provider, is_operator=False, can_write=True),
        Caller(operator, is_operator=True, can_write=True),
    ]
    for caller in callers:
        for offer_id in (published.pk, paused.pk, paused.pk + 1000):
            fast = offer_visible(offer_id, caller=caller)
            orm = offers_visible(caller=caller).filter(pk=offer_id).first()
            assert (fast is None) == (orm is None), (caller, offer_id)
            if fast is None or orm is None:
                continue
            for field in Offer._meta.concrete_fields:
                assert getattr(fast, field.attname) == getattr(orm, field.attname), field.name
            for related in ("provider", "site", "gpu_model"):
                fast_row, orm_row = getattr(fast, related), getattr(orm, related)
                for field in type(orm_row)._meta.concrete_fields:
                    assert getattr(fast_row, field.attname) == getattr(orm_row, field.attname)
            assert list(fast.nodes.all()) == list(orm.nodes.all())
    seen = offer_visible(published.pk, caller=callers[0])
    assert seen is not None
    assert [node.pk for node in seen.nodes.all()] == [nodes[1].pk]
    assert offer_visible(paused.pk, caller=callers[0]) is None
    assert offer_visible(paused.pk, caller=callers[2]) is not None
