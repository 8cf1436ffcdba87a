"""Races: many clients, each on its own database connection, against the same GPUs."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection, transaction

from contracts.models import Contract, ContractEvent
from inventory.models import Gpu
from leasing.locks import gpus_lock
from leasing.models import Allocation, Lease
from tests.leasing.pool import make_pool, next_hour
from tests.leasing.test_leases_api import overlapping_pairs

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

LEASES = "/api/v1/leases/"


def race(clients, requests):
    """Fire one request per client at the same moment; return the responses."""
    barrier = threading.Barrier(len(clients))
    responses: list = [None] * len(clients)

    def run(index):
        try:
            barrier.wait()
            responses[index] = requests(clients[index], index)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return responses


def test_32_clients_racing_for_8_gpus_get_exactly_8(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=1, gpu_count=8)
    start = next_hour().isoformat()
    clients = [client_for(customer) for _ in range(32)]
    responses = race(
        clients,
        lambda client, i: client.post(
            LEASES,
            {"offer": offer.pk, "gpu_count": 1, "start": start, "hours": 4},
            format="json",
        ),
    )
    codes = Counter(response.status_code for response in responses)
    assert set(codes) <= {201, 409}, [
        r.json() for r in responses if r.status_code not in (201, 409)
    ]
    assert all(r.json()["code"] == "capacity_gone" for r in responses if r.status_code == 409)
    allocated = Allocation.objects.filter(released_at__isnull=True).count()
    assert allocated == 8
    assert sum(Lease.objects.values_list("gpu_count", flat=True)) == 8
    assert overlapping_pairs() == 0


def test_one_lease_post_replayed_5_times_concurrently_makes_one_lease(
    client_for, provider, customer
):
    offer, _ = make_pool(provider)
    body = {"offer": offer.pk, "gpu_count": 2, "start": next_hour().isoformat(), "hours": 4}
    clients = [client_for(customer) for _ in range(5)]
    responses = race(
        clients,
        lambda client, i: client.post(
            LEASES, body, format="json", HTTP_IDEMPOTENCY_KEY="same-lease"
        ),
    )
    assert {r.status_code for r in responses} == {201}
    assert len({r.json()["id"] for r in responses}) == 1
    assert Lease.objects.count() == 1
    assert Allocation.objects.count() == 2


def test_a_placement_that_loses_its_gpus_after_writing_the_contract_leaves_no_contract(
    client_for, provider, customer
):
    """The contract is written when the unlocked read finds GPUs free, before they are locked;
    when every chosen GPU is then held by another transaction, the 409 takes the contract back."""
    offer, (node,) = make_pool(provider, nodes=1, gpu_count=8)
    body = {"offer": offer.pk, "gpu_count": 2, "start": next_hour().isoformat(), "hours": 4}
    locked, release = threading.Event(), threading.Event()

    def hold_every_gpu() -> None:
        # Another transaction booking the node's GPUs: their rows are locked, nothing is written
        # yet, so the lease's unlocked read still counts them free.
        try:
            with transaction.atomic():
                gpus_lock(Gpu.objects.filter(node=node).values_list("pk", flat=True))
                locked.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_every_gpu)
    holder.start()
    try:
        assert locked.wait(timeout=30)
        response = client_for(customer).post(LEASES, body, format="json")
    finally:
        release.set()
        holder.join()
    assert response.status_code == 409, response.json()
    assert response.json()["code"] == "capacity_gone"
    assert not Contract.objects.exists()
    assert not ContractEvent.objects.exists()
    assert not Lease.objects.exists()
    # Once the other transaction is gone, the same request gets its lease and one contract.
    again = client_for(customer).post(LEASES, body, format="json")
    assert again.status_code == 201, again.json()
    assert Contract.objects.get().pk == Lease.objects.get().contract_id
