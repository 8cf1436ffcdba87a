"""A move of the registered index sources, posted through the API and fixed by the nightly job,
re-prices contracts through a real Celery worker."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from celery import current_app
from django.utils import timezone

from contracts.choices import EventKind
from contracts.models import ContractEvent
from contracts.services import contract_activate
from tests.contracts.factories import EXIT_3_MONTHS, h200_contract

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.worker,
]

MARKET_DROP = {
    "kind": "generational_price_step",
    "successor_model": "b200",
    "trigger": "market_drop",
    "market_drop_pct": "20",
    "step": "repeg",
    "premium_pct": "10",
    "floor_rate": "1.50",
    "min_months_between_steps": 3,
}


def wait_for(predicate, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_a_market_drop_posted_by_an_operator_steps_the_rate_once(
    celery_worker_process, client_for, provider, customer, operator
):
    # Reference 2.50 USD/GPU-h; a 20 % drop triggers at <= 2.00; re-peg to market x 1.10.
    contract = h200_contract(provider, customer, clauses=[EXIT_3_MONTHS, MARKET_DROP])
    contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))
    client = client_for(operator)
    # Observations count only through sources an operator registered: three independent
    # publishers (INDEX_MIN_OWNERS), so their move is the market's, not one party's word.
    for i in range(3):
        registered = client.post(
            "/api/v1/index-sources/",
            {"name": f"lister-{i}", "kind": "published_index", "owner_name": f"Lister {i}"},
            format="json",
        )
        assert registered.status_code == 201, registered.json()
    day = timezone.now().date() - timedelta(days=1)  # the day the nightly job fixes
    batch = {
        "observations": [
            {
                "gpu_model": "h200-sxm",
                "observed_on": day.isoformat(),
                "price_per_gpu_hour": price,
                "currency": "USD",
                "source": f"lister-{i}",
            }
            for i, price in enumerate(["1.80", "1.90", "2.00"])
        ]
    }
    response = client.post("/api/v1/market-prices/", batch, format="json")
    assert response.status_code in (200, 201), response.json()
    assert all(row["eligible"] for row in response.json()["observations"])
    # The beat job fixes the day on the worker; the changed fixing re-prices contracts there.
    current_app.send_task("inventory.fix_indices", kwargs={"day": day.isoformat()})
    steps = ContractEvent.objects.filter(contract=contract, kind=EventKind.PRICE_STEP)
    assert wait_for(steps.exists), "the worker never applied the price step"
    step = steps.get()
    # Fixing of the day 1.90 <= 2.00: re-pegged to 1.90 x 1.10 = 2.09 from the next period.
    assert step.rate == Decimal("2.090000")
    assert step.effective_at > timezone.now() - timedelta(days=1)
    assert step.effective_at.day == 1
    # The same observations and the same job again: the trigger never applies twice.
    again = client.post("/api/v1/market-prices/", batch, format="json")
    assert again.status_code in (200, 201)
    current_app.send_task("inventory.fix_indices", kwargs={"day": day.isoformat()})
    time.sleep(3)
    assert steps.count() == 1
