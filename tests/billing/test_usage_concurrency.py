"""Batches that share events, posted at the same moment: each event is counted exactly once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from billing.models import UsageEvent
from tests.billing.factories import events, token_contract

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

EVENTS = "/api/v1/usage/events/"


def test_overlapping_batches_racing_in_opposite_orders_count_each_event_once(
    client_for, provider, customer
):
    now = datetime.now(UTC)
    contract = token_contract(
        provider, customer, term_start=now - timedelta(days=30), term_end=now + timedelta(days=30)
    )
    shared = events(contract, now - timedelta(hours=1), 2000, step_s=0.5)
    bodies = [
        {"events": shared},
        {"events": list(reversed(shared))},
        {"events": shared[1000:] + events(contract, now - timedelta(hours=2), 500, prefix="own")},
        {"events": list(reversed(shared[:1500]))},
    ]
    clients = [client_for(provider) for _ in bodies]
    barrier = threading.Barrier(len(bodies))
    answers: list = [None] * len(bodies)

    def post(index: int) -> None:
        try:
            barrier.wait()
            answers[index] = clients[index].post(EVENTS, bodies[index], format="json")
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [answer.status_code in (200, 201) for answer in answers] == [True] * 4, [
        answer.content[:200] for answer in answers
    ]
    bodies_out = [answer.json() for answer in answers]
    assert sum(body["accepted"] for body in bodies_out) == 2500
    assert all(body["rejected"] == 0 for body in bodies_out)
    assert UsageEvent.objects.filter(source=provider).count() == 2500
