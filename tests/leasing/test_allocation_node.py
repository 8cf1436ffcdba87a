"""Allocation.node: a copy of the GPU's node that capacity search counts by; never out of step."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from leasing.models import Allocation
from leasing.services.allocation import allocations_create
from tests.leasing.factories import busy, gpus_of, make_offer, window

pytestmark = pytest.mark.django_db


def allocations_on_another_node_than_their_gpu() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM leasing_allocation a JOIN inventory_gpu g ON g.id = a.gpu_id"
            " WHERE a.node_id IS DISTINCT FROM g.node_id"
        )
        return cursor.fetchone()[0]


def test_allocations_create_sets_each_allocation_to_its_gpus_node(provider):
    offer = make_offer(provider, nodes=2)
    start, end = window(24)
    hold = busy(gpus_of(offer.pool_nodes[:1])[:1], start, end)
    gpus = gpus_of(offer.pool_nodes)[4:12]  # four GPUs on each node

    created = allocations_create(
        gpu_ids=[gpu.pk for gpu in gpus], start=start, end=end, preemptible=False, hold=hold
    )

    assert [row.node_id for row in created] == [gpu.node_id for gpu in gpus]
    assert allocations_on_another_node_than_their_gpu() == 0


def test_an_allocation_written_without_a_node_gets_its_gpus_node_from_the_database(provider):
    offer = make_offer(provider, nodes=2)
    start, end = window(24)

    busy(gpus_of(offer.pool_nodes), start, end)  # bulk_create with no node given

    assert Allocation.objects.count() == 16
    assert allocations_on_another_node_than_their_gpu() == 0


def test_an_allocation_on_another_node_than_its_gpu_is_refused(provider):
    offer = make_offer(provider, nodes=2)
    first, second = offer.pool_nodes
    start, end = window(24)
    hold = busy(gpus_of([first])[:1], start, end)
    gpu = gpus_of([first])[1]

    with pytest.raises(IntegrityError, match="is on node"), transaction.atomic():
        Allocation.objects.create(
            gpu=gpu, node=second, hold=hold, period=DateTimeTZRange(start, end, "[)")
        )
    allocation = Allocation.objects.get(hold=hold)
    with pytest.raises(IntegrityError, match="is on node"), transaction.atomic():
        Allocation.objects.filter(pk=allocation.pk).update(node=second)

    assert allocations_on_another_node_than_their_gpu() == 0
