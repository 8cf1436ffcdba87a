"""The outbox's kick of the dispatcher after a commit: one per transaction however many events it
wrote, and none in the test settings (the suite's real worker must not dispatch for every test)."""

from __future__ import annotations

from typing import Any

import pytest

from core import events
from core.models import OutboxEvent
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"


def _lease(client_for: Any, provider: Any, customer: Any) -> None:
    offer, _ = make_pool(provider, nodes=1)
    body = {"offer": offer.pk, "gpu_count": 2, "start": next_hour(1).isoformat(), "hours": 4}
    response = client_for(customer).post(LEASES, body, format="json")
    assert response.status_code == 201, response.json()


def test_a_lease_that_writes_events_for_both_parties_kicks_the_dispatcher_once(
    settings: Any, client_for: Any, provider: Any, customer: Any, django_capture_on_commit_callbacks
):
    settings.OUTBOX_KICK_ON_COMMIT = True
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        _lease(client_for, provider, customer)
    assert OutboxEvent.objects.count() >= 2
    assert [callback for callback in callbacks if callback is events._kick] == [events._kick]


def test_the_test_settings_leave_dispatching_to_whoever_asks_for_it(
    client_for: Any, provider: Any, customer: Any, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        _lease(client_for, provider, customer)
    assert OutboxEvent.objects.count() >= 2
    assert events._kick not in callbacks
