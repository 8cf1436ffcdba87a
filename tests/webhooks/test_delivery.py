"""Deliveries to a real HTTP receiver on loopback: signed per Standard Webhooks, retried with
backoff, exactly once by id for a receiver that was down, disabled after repeated failure, and
checked again at delivery time (DNS rebinding)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import WebhookVerificationError

from accounts.models import Membership, Organization
from core.events import emit
from core.models import OutboxEvent
from tests.factories import UserFactory
from tests.webhooks.conftest import endpoint_for, pump
from tests.webhooks.receiver import Receiver
from webhooks.models import Delivery, DeliveryStatus
from webhooks.services import addresses, deliveries
from webhooks.services.deliveries import delivery_redeliver, outbox_dispatch
from webhooks.services.endpoints import secret_generate, webhook_endpoint_delete
from webhooks.tasks import deliver, dispatch

pytestmark = pytest.mark.django_db


def _emit(organization: Organization, lease_id: int = 7) -> OutboxEvent:
    return emit(organization_id=organization.pk, type="lease.created", data={"lease_id": lease_id})


def test_an_event_reaches_the_receiver_signed_and_standard_webhooks_verifies_it(
    receiver: Receiver, customer: Organization
):
    endpoint = endpoint_for(customer, receiver)
    event = _emit(customer)
    pump()
    assert len(receiver.received) == 1
    request = receiver.received[0]
    payload = request.verified(endpoint.secret)
    assert payload == {
        "id": event.message_id,
        "type": "lease.created",
        "timestamp": event.occurred_at.isoformat(),
        "data": {"lease_id": 7},
    }
    assert request.webhook_id == event.message_id
    assert request.headers["content-type"] == "application/json"
    delivery = Delivery.objects.get(endpoint=endpoint, event=event)
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert [attempt.status_code for attempt in delivery.attempts.all()] == [200]


def test_a_wrong_secret_does_not_verify(receiver: Receiver, customer: Organization):
    endpoint = endpoint_for(customer, receiver)
    _emit(customer)
    pump()
    receiver.received[0].verified(endpoint.secret)
    with pytest.raises(WebhookVerificationError):
        receiver.received[0].verified(secret_generate())


def test_only_subscribed_types_of_the_own_organization_are_delivered(
    receiver: Receiver, customer: Organization, other_customer: Organization
):
    endpoint_for(customer, receiver, types=["invoice.paid"])
    _emit(customer)
    _emit(other_customer)
    emit(organization_id=customer.pk, type="invoice.paid", data={"invoice_id": 1})
    pump()
    assert [json.loads(request.body)["type"] for request in receiver.received] == ["invoice.paid"]


def test_an_event_of_a_rolled_back_change_is_never_written_nor_sent(
    receiver: Receiver, customer: Organization
):
    endpoint_for(customer, receiver)
    with pytest.raises(RuntimeError), transaction.atomic():
        _emit(customer)
        raise RuntimeError("the change fails after the event was written")
    assert not OutboxEvent.objects.exists()
    pump()
    assert receiver.received == []


def test_a_receiver_that_is_down_gets_the_event_later_exactly_once_by_its_id(
    receiver: Receiver, customer: Organization
):
    endpoint = endpoint_for(customer, receiver)
    receiver.stop()
    event = _emit(customer)
    pump()  # connection refused
    delivery = Delivery.objects.get(endpoint=endpoint)
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempt_count == 1
    assert "ConnectionRefusedError" in delivery.attempts.get().error
    receiver.start()  # back on the same port
    pump(rounds=3)
    assert receiver.ids() == [event.message_id]
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert delivery.attempt_count == 2
    assert endpoint.deliveries.count() == 1


def test_failures_back_off_along_the_schedule_then_the_delivery_fails(
    receiver: Receiver, customer: Organization, settings: Any
):
    settings.WEBHOOKS_RETRY_SCHEDULE_SECONDS = [5, 300, 1800]
    receiver.status = 500
    endpoint = endpoint_for(customer, receiver)
    _emit(customer)
    delivery_id = None
    delays = []
    for _ in range(4):
        delivery = Delivery.objects.filter(endpoint=endpoint).first()
        if delivery is not None:
            delivery_id = delivery.pk
            # Time travel: make the retry due now instead of sleeping through the delay.
            Delivery.objects.filter(pk=delivery_id).update(next_attempt_at=timezone.now())
        pump()
        delivery = Delivery.objects.get(endpoint=endpoint)
        if delivery.next_attempt_at is not None:
            delays.append(delivery.next_attempt_at - delivery.last_attempt_at)
    assert delays == [timedelta(seconds=5), timedelta(seconds=300), timedelta(seconds=1800)]
    delivery = Delivery.objects.get(pk=delivery_id)
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.attempt_count == 4
    assert [a.status_code for a in delivery.attempts.all()] == [500] * 4
    assert len(set(receiver.ids())) == 1  # every attempt carried the same webhook-id


def test_the_default_schedule_retries_for_about_a_day():
    total = sum(django_settings.WEBHOOKS_RETRY_SCHEDULE_SECONDS)
    assert 20 * 3600 <= total <= 36 * 3600


def test_repeated_failure_disables_the_endpoint_and_keeps_its_deliveries_waiting(
    receiver: Receiver, customer: Organization, settings: Any
):
    settings.WEBHOOKS_DISABLE_AFTER_FAILURES = 3
    receiver.status = 503
    endpoint = endpoint_for(customer, receiver)
    for lease_id in range(3):
        _emit(customer, lease_id)
    pump()
    endpoint.refresh_from_db()
    assert not endpoint.enabled
    assert endpoint.consecutive_failures == 3
    assert "3 consecutive failed attempts" in endpoint.disabled_reason
    assert len(receiver.received) == 3
    _emit(customer, 99)
    pump()
    assert len(receiver.received) == 3  # a disabled endpoint gets nothing
    pending = Delivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.PENDING).count()
    assert pending == 3  # waiting, not lost: enabling the endpoint resumes them


def test_the_owner_is_emailed_when_the_endpoint_is_disabled(
    receiver: Receiver,
    customer: Organization,
    settings: Any,
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
):
    settings.WEBHOOKS_DISABLE_AFTER_FAILURES = 1
    owner = UserFactory(email="owner@acme.example")
    Membership.objects.create(user=owner, organization=customer, role="admin")
    receiver.status = 410
    endpoint = endpoint_for(customer, receiver)
    _emit(customer)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        pump()
    # Only the mail: the other callbacks send tasks to the broker.
    (mail,) = [callback for callback in callbacks if callback.__name__ == "mail_the_owner"]
    mail()
    assert [message.to for message in mailoutbox] == [["owner@acme.example"]]
    assert endpoint.url in mailoutbox[0].body


def test_a_claim_whose_worker_died_is_taken_over_and_the_old_one_does_nothing(
    receiver: Receiver, customer: Organization, settings: Any
):
    settings.WEBHOOKS_CLAIM_SECONDS = 60
    endpoint = endpoint_for(customer, receiver)
    event = _emit(customer)
    first = outbox_dispatch()
    (delivery_id, lost_claim) = first.claimed[0]
    # The worker that got it is killed before it posts anything. While the claim's lease runs,
    # no other dispatcher takes the delivery.
    assert outbox_dispatch().claimed == []
    later = outbox_dispatch(now=timezone.now() + timedelta(seconds=61))
    assert [claimed for claimed, _ in later.claimed] == [delivery_id]
    new_claim = later.claimed[0][1]
    assert deliver(delivery_id, lost_claim) == "stale"  # the broker's late copy
    assert deliver(delivery_id, new_claim) == "delivered"
    assert deliver(delivery_id, new_claim) == "stale"  # a repeated message
    assert receiver.ids() == [event.message_id]
    assert Delivery.objects.get(endpoint=endpoint).attempt_count == 1


def test_manual_redelivery_sends_the_same_event_id_again(
    receiver: Receiver, customer: Organization
):
    endpoint = endpoint_for(customer, receiver)
    event = _emit(customer)
    pump()
    delivery = Delivery.objects.get(endpoint=endpoint)
    delivery_redeliver(delivery=delivery)
    pump()
    assert receiver.ids() == [event.message_id, event.message_id]
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert delivery.attempt_count == 2


def test_a_host_that_re_resolves_to_a_private_address_is_refused_at_delivery(
    receiver: Receiver, customer: Organization, monkeypatch: pytest.MonkeyPatch
):
    answers = {"hooks.acme.example": ["127.0.0.1"]}
    monkeypatch.setattr(addresses, "resolve", lambda host, port: answers[host])
    endpoint = endpoint_for(customer, receiver)
    endpoint.url = f"http://hooks.acme.example:{receiver.port}/hooks"
    endpoint.save(update_fields=["url"])
    _emit(customer)
    answers["hooks.acme.example"] = ["10.0.0.7"]  # DNS rebinding after the check at creation
    pump()
    assert receiver.received == []
    attempt = Delivery.objects.get(endpoint=endpoint).attempts.get()
    assert attempt.error.startswith("url_address_not_allowed")
    answers["hooks.acme.example"] = ["127.0.0.1"]
    pump()
    assert len(receiver.received) == 1  # pinned to the checked address, with the URL's Host


def test_the_dispatch_task_fans_out_and_claims(receiver: Receiver, customer: Organization):
    endpoint_for(customer, receiver)
    _emit(customer)
    assert dispatch() == {"events": 1, "deliveries_created": 1, "claimed": 1}
    assert dispatch() == {"events": 0, "deliveries_created": 0, "claimed": 0}


def test_an_endpoint_deleted_during_an_attempt_leaves_nothing_behind(
    receiver: Receiver, customer: Organization, monkeypatch: pytest.MonkeyPatch
):
    endpoint = endpoint_for(customer, receiver)
    _emit(customer)
    (delivery_id, claim_id) = outbox_dispatch().claimed[0]
    send = deliveries.post

    def post_while_the_endpoint_is_deleted(url: str, **kwargs: Any) -> deliveries.Answer:
        answer = send(url, **kwargs)
        webhook_endpoint_delete(endpoint=endpoint)
        return answer

    monkeypatch.setattr(deliveries, "post", post_while_the_endpoint_is_deleted)
    assert deliver(delivery_id, claim_id) == "gone"
    assert not Delivery.objects.exists()
    assert len(receiver.received) == 1
