"""A worker SIGKILLed in the middle of a webhook POST loses nothing: the delivery is claimed
again once its claim runs out, the receiver gets the event again with the same webhook-id (at
least once; exactly once for a receiver that deduplicates on it), and the killed worker's task,
put back by the broker, finds its claim stale and does nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.db import transaction

from accounts.models import Organization
from core import events
from tests.faults.tools import RedisServer, Worker, send_task, service_env, wait_for
from tests.webhooks.receiver import Receiver
from webhooks.models import Delivery, DeliveryStatus
from webhooks.services.endpoints import webhook_endpoint_create

TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)
CLAIM_SECONDS = 3


@TRANSACTIONAL
@pytest.mark.worker
def test_a_worker_killed_mid_post_delivers_the_event_again_with_the_same_id(
    private_redis: RedisServer,
    customer: Organization,
    tmp_path: Path,
    settings: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.WEBHOOKS_ALLOW_LOOPBACK = True  # type: ignore[attr-defined]
    # The dispatcher is sent to the private broker below, as beat would; the on-commit kick
    # would go to the suite's broker, where another worker could take it.
    monkeypatch.setattr(events, "_kick", lambda: None)
    receiver = Receiver().start()
    try:
        endpoint = webhook_endpoint_create(
            organization=customer, url=receiver.url, event_types=["invoice.paid"]
        )
        with transaction.atomic():
            event = events.emit(
                organization_id=customer.pk, type="invoice.paid", data={"invoice_id": 42}
            )
        env = service_env(broker_url=private_redis.url, tmp_path=tmp_path, stripe_url=None)
        env.update(
            WEBHOOKS_ALLOW_LOOPBACK="true",
            WEBHOOKS_CLAIM_SECONDS=str(CLAIM_SECONDS),
            WEBHOOKS_RETRY_SCHEDULE_SECONDS="1,1,1",
        )
        receiver.holding.set()
        first = Worker(env, tmp_path / "worker.log")
        try:
            first.wait_ready()
            send_task(private_redis.url, "webhooks.dispatch")
            assert receiver.held.wait(timeout=60), first.output()[-4000:]
        finally:
            first.kill()  # mid-POST: the request reached the receiver, no answer was read
        delivery = Delivery.objects.get(endpoint=endpoint)
        assert delivery.status == DeliveryStatus.PENDING
        assert delivery.attempt_count == 0  # the killed attempt recorded nothing
        receiver.release()

        second = Worker(env, tmp_path / "worker.log")
        try:
            second.wait_ready()

            def delivered() -> bool:
                send_task(private_redis.url, "webhooks.dispatch")  # what beat does each minute
                time.sleep(1)
                delivery.refresh_from_db()
                return delivery.status == DeliveryStatus.SUCCEEDED

            wait_for(delivered, seconds=60, what="the delivery to be claimed again and delivered")
            # Past the broker's visibility timeout the killed worker's deliver task comes back
            # to the new worker: its claim is stale, it posts nothing.
            time.sleep(5)
        finally:
            second.kill()
        assert receiver.ids() == [event.message_id, event.message_id]
        assert set(receiver.ids()) == {event.message_id}  # exactly once, by its id
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempt_count) == (DeliveryStatus.SUCCEEDED, 1)
        for request in receiver.received:
            request.verified(endpoint.secret)
    finally:
        receiver.stop()
