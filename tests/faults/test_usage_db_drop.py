"""The database connection of a usage batch dies while the batch is written.

The batch goes over real HTTP to the live server. A trigger holds the INSERT of the batch's
marker event (rows are inserted in event id order, so the events before it are already written
in the same statement); another session then terminates the request's server process, as a
failover or an operator's pg_terminate_backend would.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.utils import timezone

from accounts.choices import KeyScope
from accounts.models import Organization
from accounts.services import api_key_create
from billing.models import UsageBatch, UsageEvent
from core.models import IdempotencyRecord
from tests.billing.factories import event, token_contract
from tests.faults.tools import StalledInserts, terminate_backend

TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)
EVENTS = 40
MARKER = "evt-020"


@pytest.fixture
def batch(provider: Organization, customer: Organization) -> dict[str, Any]:
    """40 events of the last hour on a live token-SLA contract of the provider."""
    now = timezone.now()
    contract = token_contract(
        provider, customer, term_start=now - timedelta(days=30), term_end=now + timedelta(days=365)
    )
    start = now - timedelta(hours=1)
    return {
        "events": [
            event(f"evt-{i:03d}", contract, start + timedelta(seconds=i)) for i in range(EVENTS)
        ]
    }


@TRANSACTIONAL
def test_a_batch_whose_database_connection_dies_mid_write_leaves_nothing_and_a_retry_stores_it(
    live_server: Any, provider: Organization, batch: dict[str, Any]
) -> None:
    key = api_key_create(organization=provider, name="faults", scope=KeyScope.WRITE)
    session = requests.Session()
    session.headers["Authorization"] = f"Api-Key {key.raw_key}"
    headers = {"Idempotency-Key": "batch-0001"}
    url = f"{live_server.url}/api/v1/usage/events/"

    stall = StalledInserts("billing_usageevent", f"NEW.event_id = '{MARKER}'")
    with stall, ThreadPoolExecutor(max_workers=1) as pool:
        sent = pool.submit(session.post, url, json=batch, headers=headers, timeout=60)
        terminate_backend(stall.wait_stalled())
        failed = sent.result()

    # A server error in the API's JSON error body, never a replayable answer.
    assert failed.status_code >= 500, failed.text
    assert failed.headers["Content-Type"].startswith("application/json"), failed.text[:300]
    assert set(failed.json()) == {"code", "message", "detail"}
    assert "Idempotent-Replayed" not in failed.headers
    # Nothing of the batch is visible: no event, no batch row, no stored answer for the key.
    assert not UsageEvent.objects.filter(source_id=provider.pk).exists()
    assert not UsageBatch.objects.filter(provider=provider).exists()
    assert not IdempotencyRecord.objects.filter(scope=f"org:{provider.pk}").exists()

    retried = session.post(url, json=batch, headers=headers, timeout=60)
    assert retried.status_code == 201, retried.text
    assert "Idempotent-Replayed" not in retried.headers
    assert (retried.json()["accepted"], retried.json()["duplicate"]) == (EVENTS, 0)

    replayed = session.post(url, json=batch, headers=headers, timeout=60)
    assert replayed.status_code == 201
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert replayed.json() == retried.json()
    assert UsageEvent.objects.filter(source_id=provider.pk).count() == EVENTS
    assert UsageBatch.objects.get(provider=provider).accepted_count == EVENTS
