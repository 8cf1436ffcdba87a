"""Races on the pool sums a search by reliability reads (leasing 0027): nodes of one pool key
created, resized, retired and given outages at the same moment, each request on its own database
connection, must leave the kept sizes and outage rows equal to a recount."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.inventory.factories import make_site, node_payload
from tests.leasing.free_spans import pool_sums, pool_sums_counted
from tests.leasing.test_lease_concurrency import race

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

NODES = "/api/v1/nodes/"
CLIENTS = 8


def test_racing_writes_to_one_pool_key_leave_its_sums_equal_to_a_recount(client_for, provider):
    site = make_site(provider)
    clients = [client_for(provider) for _ in range(CLIENTS)]

    created = race(
        clients,
        lambda client, i: client.post(
            NODES,
            {
                "site": site.pk,
                **node_payload(hostname=f"race-{i}", serial=f"SN-RACE-{i}", nvlink=i % 2 == 0),
            },
            format="json",
        ),
    )
    assert Counter(response.status_code for response in created) == {201: CLIENTS}
    node_ids = [response.json()["id"] for response in created]
    assert pool_sums() == pool_sums_counted()

    now = timezone.now()
    outages = race(
        clients,
        lambda client, i: client.post(
            "/api/v1/outages/",
            {
                "node": node_ids[i],
                "start": (now - timedelta(days=3 + i)).isoformat(),
                "end": (now - timedelta(days=1)).isoformat(),
                "kind": "unplanned",
            },
            format="json",
        ),
    )
    assert Counter(response.status_code for response in outages) == {201: CLIENTS}

    # Half resized, half retired (with their outages), all at once.
    changed = race(
        clients,
        lambda client, i: client.patch(
            f"{NODES}{node_ids[i]}/",
            {"gpu_count": 4} if i % 2 else {"status": "retired"},
            format="json",
        ),
    )
    assert Counter(response.status_code for response in changed) == {200: CLIENTS}
    sizes, outage_rows = pool_sums()
    assert (sizes, outage_rows) == pool_sums_counted()
    assert sum(row[4] for row in sizes) == CLIENTS // 2
    assert sum(row[5] for row in sizes) == 4 * CLIENTS // 2
    assert sum(1 for row in outage_rows if row[6]) == CLIENTS // 2  # retired
