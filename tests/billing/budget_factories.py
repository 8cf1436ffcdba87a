"""Spend for the budget and usage alert tests, made through the real services: token usage
ingested from the provider, hourly rollups refreshed as the ingest task does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from accounts.models import Organization
from billing.services.ingest import usage_batch_ingest
from billing.services.rollups import usage_rollups_refresh_batch
from contracts.models import Contract
from leasing.services.offers import sla_subscription_create
from tests.billing.factories import event, token_contract
from tests.leasing.factories import make_sla_offering

# A day of June 2026 inside the default token contract's term (all of 2026).
JUNE_15 = datetime(2026, 6, 15, 12, tzinfo=UTC)
# One event of 10 million input and 2 million output tokens costs 5.00 + 3.00 = 8.00 USD at the
# factory contract's 0.50 / 1.50 USD per million.
EVENT_COST = 8


def spend(
    provider: Organization,
    contract: Contract,
    *,
    count: int,
    at: datetime,
    prefix: str = "spend",
    **fields: Any,
) -> int:
    """Ingest `count` successful 8 USD events a minute apart ending before `at`; refresh their
    rollups; returns the batch id."""
    raw = [
        event(
            f"{prefix}-{i}",
            contract,
            at - timedelta(minutes=count - i),
            input_tokens=10_000_000,
            output_tokens=2_000_000,
            **fields,
        )
        for i in range(count)
    ]
    outcome = usage_batch_ingest(provider=provider, raw_events=raw, now=at)
    assert outcome.accepted == count, outcome.results
    usage_rollups_refresh_batch(batch_id=outcome.batch_id, now=at)
    return outcome.batch_id


def subscribed(provider: Organization, customer: Organization) -> Contract:
    """A token contract bought from an SLA offering: TTFT p95 400 ms, 20,000 tokens/s."""
    contract = token_contract(provider, customer)
    sla_subscription_create(offering=make_sla_offering(provider), contract=contract)
    return contract
