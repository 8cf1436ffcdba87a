"""The webhook admin: endpoints without secrets, deliveries with their attempts, redelivery."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Organization
from core.events import emit
from tests.webhooks.conftest import endpoint_for, pump
from tests.webhooks.receiver import Receiver
from webhooks.models import Delivery, DeliveryStatus, WebhookEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client: Any) -> Any:
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.test", "pw"))
    return client


def test_deliveries_show_their_attempts_and_can_be_redelivered(
    admin_client: Any, receiver: Receiver, customer: Organization
):
    endpoint = endpoint_for(customer, receiver)
    event = emit(organization_id=customer.pk, type="invoice.paid", data={"invoice_id": 1})
    receiver.status = 500
    pump()
    delivery = Delivery.objects.get(endpoint=endpoint)
    listing = admin_client.get("/admin/webhooks/delivery/").content.decode()
    assert event.message_id in listing
    page = admin_client.get(f"/admin/webhooks/delivery/{delivery.pk}/change/").content.decode()
    assert "HTTP 500" in page
    receiver.status = 200
    Delivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.FAILED, next_attempt_at=None
    )
    response = admin_client.post(
        "/admin/webhooks/delivery/",
        {"action": "redeliver", "_selected_action": [delivery.pk]},
        follow=True,
    )
    assert "queued again" in response.content.decode()
    pump()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert receiver.ids() == [event.message_id, event.message_id]


def test_endpoint_pages_never_show_the_secret_and_can_enable(
    admin_client: Any, receiver: Receiver, customer: Organization
):
    endpoint = endpoint_for(customer, receiver)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False, consecutive_failures=9)
    assert (
        endpoint.secret not in admin_client.get("/admin/webhooks/webhookendpoint/").content.decode()
    )
    page = admin_client.get(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/")
    assert endpoint.secret not in page.content.decode()
    admin_client.post(
        "/admin/webhooks/webhookendpoint/",
        {"action": "enable", "_selected_action": [endpoint.pk]},
    )
    endpoint.refresh_from_db()
    assert endpoint.enabled and endpoint.consecutive_failures == 0
    assert admin_client.get("/admin/core/outboxevent/").status_code == 200
