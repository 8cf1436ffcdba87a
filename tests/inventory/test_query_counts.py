"""Query-count baselines: every list endpoint costs the same with 2 rows as with 12."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Outage
from tests.inventory.factories import make_node, make_site
from tests.inventory.test_market_prices import record

pytestmark = pytest.mark.django_db

# One query resolves the API key (with its organization), one reads the page.
BASELINES = {
    "/api/v1/gpu-models/": 2,
    "/api/v1/llm-models/": 2,
    "/api/v1/market-prices/": 2,
    "/api/v1/sites/": 2,
    "/api/v1/nodes/": 2,
    "/api/v1/nodes/?health=ok&country=AU&gpu_model=h200-sxm&status=active": 2,
    "/api/v1/gpus/": 2,
    "/api/v1/outages/": 2,
}


def _grow(provider, copies: int) -> None:
    for number in range(copies):
        site = make_site(provider, name=f"site-{number}-{copies}")
        node = make_node(site, hostname=f"node-{number}", gpu_count=1)
        start = datetime(2025, 6, 1, tzinfo=UTC) + timedelta(days=number)
        Outage.objects.create(
            node=node, start=start, end=start + timedelta(hours=1), kind="planned"
        )
        record({"observed_on": f"2025-06-{number + 1:02d}", "source": f"s{copies}"})


def _count(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, response.json()
    assert response.json()["results"]
    return len(queries)


@pytest.mark.parametrize("url", list(BASELINES))
def test_list_endpoints_do_not_grow_with_rows(provider, client_for, url, django_assert_num_queries):
    client = client_for(provider)
    _grow(provider, 2)
    client.get(url)  # warm the key's last-used stamp so every count below is alike
    small = _count(client, url)
    _grow(provider, 10)
    assert _count(client, url) == small
    with django_assert_num_queries(BASELINES[url]):
        client.get(url)


def test_a_customer_list_costs_the_same(customer, provider, client_for, django_assert_num_queries):
    _grow(provider, 6)
    client = client_for(customer)
    client.get("/api/v1/nodes/")
    with django_assert_num_queries(BASELINES["/api/v1/nodes/"]):
        response = client.get("/api/v1/nodes/")
    assert len(response.json()["results"]) == 6
