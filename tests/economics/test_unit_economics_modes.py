"""Unit economics per mode: online and batch requests of an SLA offering costed apart.

The worked-example server costs 4,955.91 USD in January 2027 (see test_unit_economics). Its
offering served, on 2027-01-10:
- 40 online successes of 1,000 input tokens (600 from the prompt cache) and 250 output tokens:
  the GPUs computed 400 + 250 = 650 tokens each, 26,000 in all;
- 2 online errors of 1,000 input tokens, all computed: 2,000;
- 10 batch successes of 4,000 input and 1,000 output tokens: 5,000 each, 50,000 in all.
Online is 28,000 of 78,000 computed tokens: round(4,955.91 x 28 / 78) = 1,779.04 USD;
batch takes the rest, 3,176.87 USD.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from billing.services.ingest import usage_batch_ingest
from billing.services.rollups import usage_rollups_refresh
from economics.services.assets import asset_economics_refresh
from leasing.services.offers import sla_subscription_create
from tests.billing.factories import event, token_contract
from tests.billing.test_batch_cached_tokens import TIERS
from tests.economics.factories import at
from tests.economics.factories import worked_example_node as server
from tests.leasing.factories import make_sla_offering

pytestmark = pytest.mark.django_db

FEB = datetime(2027, 2, 1, tzinfo=UTC)


@pytest.fixture
def offering_id(provider: Any, customer: Any) -> int:
    node = server(provider)
    offering = make_sla_offering(provider, committed_tokens_per_s=100, **TIERS)
    offering.nodes.add(node)
    contract = token_contract(
        provider,
        customer,
        term_start=datetime(2027, 1, 1, tzinfo=UTC),
        term_end=datetime(2028, 1, 1, tzinfo=UTC),
    )
    sla_subscription_create(offering=offering, contract=contract)
    start = at(1, 10, 9)
    batch = [
        event(f"on-{i}", contract, start + timedelta(seconds=30 * i), cached_input_tokens=600)
        for i in range(40)
    ]
    batch += [
        event(
            f"err-{i}", contract, start + timedelta(seconds=7 + i), status="error", output_tokens=0
        )
        for i in range(2)
    ]
    batch += [
        event(
            f"batch-{i}",
            contract,
            start + timedelta(seconds=11 + i),
            mode="batch",
            input_tokens=4000,
            output_tokens=1000,
            ttft_ms=None,
            e2e_ms=None,
        )
        for i in range(10)
    ]
    with time_machine.travel(at(1, 10, 11), tick=False):
        assert (
            usage_batch_ingest(provider=provider, raw_events=batch, now=at(1, 10, 11)).accepted
            == 52
        )
        usage_rollups_refresh(now=at(1, 10, 11))
    asset_economics_refresh(now=FEB)
    return offering.pk


def test_online_and_batch_each_carry_their_share_of_the_computed_tokens(
    offering_id: int, provider: Any, client_for: Any
) -> None:
    client = client_for(provider)
    with time_machine.travel(FEB, tick=False):
        response = client.get(
            "/api/v1/unit-economics/",
            {"offering": offering_id, "from": "2027-01-01", "to": "2027-01-31"},
        )
    assert response.status_code == 200, response.content
    [january] = response.json()["results"]
    assert january["total_cost"] == "4955.91"
    online, batch = january["by_mode"]["online"], january["by_mode"]["batch"]
    assert (online["total_cost"], batch["total_cost"]) == ("1779.04", "3176.87")
    assert online["compute_share"]["value"] == "0.358974"  # 28,000 / 78,000
    assert (online["requests_total"], online["requests_successful"]) == (42, 40)
    assert online["tokens_successful"] == 40 * 1250
    # 1,779.04 / 40 requests; 1,779.04 per 50,000 tokens.
    assert online["cost_per_successful_request"]["value"] == "44.476000"
    assert online["cost_per_million_successful_tokens"]["value"] == "35580.800000"
    # 3,176.87 / 10 requests; 3,176.87 per 50,000 tokens.
    assert batch["cost_per_successful_request"]["value"] == "317.687000"
    assert batch["cost_per_million_successful_tokens"]["value"] == "63537.400000"
    # Batch requests have no latency SLOs: the hour's TTFT percentiles are the online ones.
    assert january["hourly"][0]["ttft_p95_ms"] == pytest.approx(120.0)
    with time_machine.travel(FEB, tick=False):
        csv_body = client.get(
            "/api/v1/unit-economics/",
            {"offering": offering_id, "from": "2027-01-01", "to": "2027-01-31", "format": "csv"},
        ).content.decode()
    header, row = csv_body.splitlines()[:2]
    values = dict(zip(header.split(","), row.split(","), strict=True))
    assert values["batch_cost_per_successful_request"] == "317.687000"
