"""The lease and hold creation path: a fixed number of statements per lease, and expired holds
lapsed by the beat task, or by a placement they stand in the way of — never swept per request."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leasing.choices import HoldStatus
from leasing.locks import GPUS_SKIP_LOCKED
from leasing.models import Hold, Lease
from leasing.tasks import expire_holds
from tests.contracts.factories import EXIT_3_MONTHS
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

LEASES, HOLDS = "/api/v1/leases/", "/api/v1/holds/"

# POST /api/v1/leases/ from an offer and a window, with an Idempotency-Key, once the process is
# warm: authentication, the key's record, the offer with its named nodes (one statement), the
# admission checks, the fixing of reference, the pool, the free GPUs read, the contract (number,
# row, clauses, history, events, put in force), the chosen GPUs locked, the lease and its history
# and webhook rows, the allocations, the answer read back (two statements) and stored on the key.
# 50 statements (22 SELECTs) before the expired-hold sweep left the request and the contract
# stopped reading back its clauses; 35 (13) before the offer's nodes were read with it.
LEASE_STATEMENTS = 33
LEASE_SELECTS = 12
# The same request when the window is full (409 capacity_gone): authentication, the key's
# record, the offer, the admission checks, the fixing, the pool, the free GPUs, the expired holds
# in the way, the GPUs free if interruptible ones were cut (counted for the answer too), the
# answer stored on the key.
FULL_STATEMENTS = 17
FULL_SELECTS = 10


def window(offer: Any, count: int, *, start_in_hours: int = 1, hours: int = 4) -> dict[str, Any]:
    return {
        "offer": offer.pk,
        "gpu_count": count,
        "start": next_hour(start_in_hours).isoformat(),
        "hours": hours,
    }


def statement_kinds(queries: list[dict[str, Any]]) -> Counter[str]:
    return Counter(query["sql"].split(None, 1)[0].upper() for query in queries)


def test_a_lease_through_the_api_runs_a_fixed_number_of_statements(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=2, contract_template=[EXIT_3_MONTHS])
    client = client_for(customer)
    warm = client.post(
        LEASES, window(offer, 2), format="json", headers={"Idempotency-Key": "warm-up"}
    )
    assert warm.status_code == 201, warm.json()
    with CaptureQueriesContext(connection) as captured:
        response = client.post(
            LEASES, window(offer, 2), format="json", headers={"Idempotency-Key": "counted"}
        )
    assert response.status_code == 201, response.json()
    kinds = statement_kinds(captured.captured_queries)
    assert len(captured.captured_queries) <= LEASE_STATEMENTS, kinds
    # nextval() of the contract number is a SELECT too.
    assert kinds["SELECT"] <= LEASE_SELECTS, kinds
    # The contract's clause set is written once and never read back during the request.
    clause_reads = [
        q for q in captured.captured_queries if q["sql"].startswith('SELECT "contracts_clause"')
    ]
    assert clause_reads == []
    assert Lease.objects.get(pk=response.json()["id"]).contract.clauses.get().kind == ("exit_terms")
    # The contract is written once GPUs are found free and before any is locked; the lease after.
    order = [q["sql"] for q in captured.captured_queries]
    contract_insert = first_index(order, 'INSERT INTO "contracts_contract"')
    gpu_lock = first_index(order, GPUS_SKIP_LOCKED)
    free_read = first_index(order, "FROM inventory_gpu g")
    lease_insert = first_index(order, 'INSERT INTO "leasing_lease"')
    assert free_read < contract_insert < gpu_lock < lease_insert


def first_index(statements: list[str], fragment: str) -> int:
    return next(i for i, sql in enumerate(statements) if fragment in sql)


def test_a_lease_refused_for_want_of_capacity_runs_a_fixed_number_of_statements(
    client_for, provider, customer
):
    offer, _ = make_pool(provider, nodes=1)
    client = client_for(customer)
    warm = client.post(
        LEASES, window(offer, 8), format="json", headers={"Idempotency-Key": "warm-up"}
    )
    assert warm.status_code == 201, warm.json()
    with CaptureQueriesContext(connection) as captured:
        response = client.post(
            LEASES, window(offer, 2), format="json", headers={"Idempotency-Key": "counted"}
        )
    assert response.status_code == 409, response.json()
    assert response.json()["code"] == "capacity_gone"
    assert response.json()["detail"] == {"free_gpus": 0, "requested": 2}
    kinds = statement_kinds(captured.captured_queries)
    assert len(captured.captured_queries) <= FULL_STATEMENTS, kinds
    assert kinds["SELECT"] <= FULL_SELECTS, kinds
    # No GPU was found free: no contract was started, not even one rolled back.
    assert not any(
        "contracts_contract_number_seq" in q["sql"] or 'INSERT INTO "contracts_' in q["sql"]
        for q in captured.captured_queries
    )


def test_a_lease_leaves_expired_holds_out_of_its_way_to_the_beat_task(
    client_for, provider, customer
):
    offer, _ = make_pool(provider, nodes=2)
    client = client_for(customer)
    hold = client.post(HOLDS, window(offer, 8, start_in_hours=48), format="json")
    assert hold.status_code == 201, hold.json()
    Hold.objects.filter(pk=hold.json()["id"]).update(
        expires_at=Hold.objects.get(pk=hold.json()["id"]).created_at - timedelta(seconds=1)
    )
    lease = client.post(LEASES, window(offer, 8), format="json")
    assert lease.status_code == 201, lease.json()
    # The request did not sweep a hold that was not in its way ...
    assert Hold.objects.get().status == HoldStatus.ACTIVE
    # ... the beat task lapses it and frees its GPUs.
    assert expire_holds() == 1
    assert Hold.objects.get().status == HoldStatus.EXPIRED
    again = client.post(HOLDS, window(offer, 16, start_in_hours=48), format="json")
    assert again.status_code == 201, again.json()


def test_an_expired_hold_in_the_way_is_lapsed_by_the_lease_that_needs_its_gpus(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider, nodes=2)
    holder = client_for(other_customer)
    held = holder.post(HOLDS, window(offer, 12), format="json")
    assert held.status_code == 201, held.json()
    Hold.objects.filter(pk=held.json()["id"]).update(
        expires_at=Hold.objects.get(pk=held.json()["id"]).created_at - timedelta(seconds=1)
    )
    lease = client_for(customer).post(LEASES, window(offer, 16), format="json")
    assert lease.status_code == 201, lease.json()
    hold = Hold.objects.get()
    assert hold.status == HoldStatus.EXPIRED
    assert hold.events.filter(to_status=HoldStatus.EXPIRED).count() == 1
    assert expire_holds() == 0


def test_a_live_hold_in_the_way_still_answers_409(client_for, provider, customer, other_customer):
    offer, _ = make_pool(provider)
    assert (
        client_for(other_customer).post(HOLDS, window(offer, 6), format="json").status_code == 201
    )
    response = client_for(customer).post(LEASES, window(offer, 4), format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "capacity_gone"
    assert Hold.objects.get().status == HoldStatus.ACTIVE
