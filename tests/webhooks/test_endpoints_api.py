"""/api/v1/webhook-endpoints/: CRUD of the caller's own endpoints, the secret shown once, SSRF
and event-type rules as 400s with stable codes, deliveries and redelivery."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Organization
from core.events import emit
from tests.conftest import ClientFor
from tests.webhooks.conftest import pump
from tests.webhooks.receiver import Receiver
from webhooks.models import WebhookEndpoint
from webhooks.rules import MAX_EVENT_TYPES
from webhooks.services import addresses

pytestmark = pytest.mark.django_db

URL = "/api/v1/webhook-endpoints/"
PUBLIC = "https://93.184.215.14/hooks"


def _create(client: Any, **body: Any) -> Any:
    return client.post(URL, {"url": PUBLIC, "event_types": ["invoice.paid"], **body})


def test_a_created_endpoint_shows_its_secret_once(client_for: ClientFor, customer: Organization):
    client = client_for(customer)
    response = _create(client, description="ERP")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["secret"].startswith("whsec_")
    assert body["event_types"] == ["invoice.paid"]
    assert body["enabled"] is True
    listed = client.get(URL).json()["results"]
    assert [row["id"] for row in listed] == [body["id"]]
    assert "secret" not in listed[0]
    assert "secret" not in client.get(f"{URL}{body['id']}/").json()


def test_another_organization_sees_updates_and_deletes_nothing_of_it(
    client_for: ClientFor, customer: Organization, other_customer: Organization, operator: Any
):
    endpoint_id = _create(client_for(customer)).json()["id"]
    for intruder in (client_for(other_customer), client_for(operator)):
        assert intruder.get(URL).json()["results"] == []
        assert intruder.get(f"{URL}{endpoint_id}/").status_code == 404
        assert intruder.patch(f"{URL}{endpoint_id}/", {"enabled": False}).status_code == 404
        assert intruder.delete(f"{URL}{endpoint_id}/").status_code == 404
    assert WebhookEndpoint.objects.get(pk=endpoint_id).enabled


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://93.184.215.14/hooks", "url_scheme_not_allowed"),
        ("ftp://93.184.215.14/hooks", "url_scheme_not_allowed"),
        ("file:///etc/passwd", "url_scheme_not_allowed"),
        ("gopher://127.0.0.1:6379/_FLUSHALL", "url_scheme_not_allowed"),
        ("not a url", "invalid_url"),
        ("https://", "invalid_url"),
        ("https://user:secret@93.184.215.14/", "invalid_url"),
        ("https://93.184.215.14:99999/", "invalid_url"),
        ("https://" + "a" * 2100 + ".example/", "invalid_url"),
        # 127.0.0.1 and [::1] are in the tests' ALLOWED_HOSTS: the service itself.
        ("https://127.0.0.1/hooks", "url_host_not_allowed"),
        ("https://[::1]/hooks", "url_host_not_allowed"),
        ("https://127.0.0.2/hooks", "url_address_not_allowed"),
        ("https://[0:0:0:0:0:0:0:1]/hooks", "url_address_not_allowed"),
        ("https://10.1.2.3/hooks", "url_address_not_allowed"),
        ("https://192.168.0.10/hooks", "url_address_not_allowed"),
        ("https://172.16.5.4/hooks", "url_address_not_allowed"),
        ("https://169.254.169.254/latest/meta-data/", "url_address_not_allowed"),
        ("https://[fe80::1]/hooks", "url_address_not_allowed"),
        ("https://[fd00::1]/hooks", "url_address_not_allowed"),
        ("https://[::ffff:10.0.0.1]/hooks", "url_address_not_allowed"),
        ("https://224.0.0.1/hooks", "url_address_not_allowed"),
        ("https://240.0.0.1/hooks", "url_address_not_allowed"),
        ("https://0.0.0.0/hooks", "url_address_not_allowed"),
        ("https://100.64.0.1/hooks", "url_address_not_allowed"),
        ("https://testserver/hooks", "url_host_not_allowed"),
        ("https://localhost/hooks", "url_host_not_allowed"),
    ],
)
def test_urls_other_than_public_https_are_refused(
    client_for: ClientFor, customer: Organization, url: str, code: str
):
    response = _create(client_for(customer), url=url)
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code
    assert response.json()["detail"]["field"] == "url"
    assert not WebhookEndpoint.objects.exists()


def test_the_service_s_own_host_names_are_refused(
    client_for: ClientFor, customer: Organization, settings: Any
):
    settings.WEBHOOKS_OWN_HOSTS = [".cardhour.example"]
    response = _create(client_for(customer), url="https://api.cardhour.example/hooks")
    assert response.json()["code"] == "url_host_not_allowed"


@pytest.mark.parametrize(
    ("answers", "code"),
    [
        (["10.0.0.8"], "url_address_not_allowed"),
        (["93.184.215.14", "192.168.1.1"], "url_address_not_allowed"),  # any bad one refuses
        ([], "url_unresolvable"),
        (OSError("Name or service not known"), "url_unresolvable"),
    ],
)
def test_a_host_name_is_checked_on_every_address_it_resolves_to(
    client_for: ClientFor,
    customer: Organization,
    monkeypatch: pytest.MonkeyPatch,
    answers: Any,
    code: str,
):
    def resolve(host: str, port: int) -> list[str]:
        if isinstance(answers, Exception):
            raise answers
        return answers

    monkeypatch.setattr(addresses, "resolve", resolve)
    response = _create(client_for(customer), url="https://hooks.acme.example/in")
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_a_host_name_with_public_addresses_is_accepted(
    client_for: ClientFor, customer: Organization, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(addresses, "resolve", lambda host, port: ["93.184.215.14"])
    response = _create(client_for(customer), url="https://hooks.acme.example/in?x=1")
    assert response.status_code == 201


def test_loopback_over_http_only_when_the_setting_allows_it(
    client_for: ClientFor, customer: Organization, settings: Any
):
    client = client_for(customer)
    assert _create(client, url="http://127.0.0.1:8080/in").json()["code"] == (
        "url_scheme_not_allowed"
    )
    settings.WEBHOOKS_ALLOW_LOOPBACK = True
    assert _create(client, url="http://127.0.0.1:8080/in").status_code == 201
    # Loopback, not the private network.
    assert _create(client, url="http://10.0.0.1/in").json()["code"] == "url_address_not_allowed"


@pytest.mark.parametrize(
    ("event_types", "code"),
    [
        ([], "event_types_required"),
        (["invoice.paid"] * (MAX_EVENT_TYPES + 1), "too_many_event_types"),
        (["invoice.paid"] * 100_000, "too_many_event_types"),
        (["invoice.paid", "invoice.paid"], "duplicate_event_type"),
        (["invoice.exploded"], "unknown_event_type"),
        (["x" * 10_000], "unknown_event_type"),
        ([1], "invalid_event_types"),
        ([None], "invalid_event_types"),
        ([["invoice.paid"]], "invalid_event_types"),
        ([{"type": "invoice.paid"}], "invalid_event_types"),
        ("invoice.paid", "invalid_event_types"),
        ({"invoice.paid": True}, "invalid_event_types"),
        (None, "invalid_event_types"),
    ],
)
def test_bad_event_type_lists_are_400s_with_stable_codes(
    client_for: ClientFor, customer: Organization, event_types: Any, code: str
):
    response = _create(client_for(customer), event_types=event_types)
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code
    assert response.json()["detail"]["field"] == "event_types"


def test_unknown_fields_and_a_missing_url_are_refused(
    client_for: ClientFor, customer: Organization
):
    client = client_for(customer)
    assert client.post(URL, {"event_types": ["invoice.paid"]}).status_code == 400
    response = _create(client, secret="whsec_mine")
    assert response.status_code == 400


def test_an_update_is_checked_like_a_create_and_enabling_clears_failures(
    client_for: ClientFor, customer: Organization
):
    client = client_for(customer)
    endpoint_id = _create(client).json()["id"]
    bad = client.patch(f"{URL}{endpoint_id}/", {"url": "https://10.0.0.1/x"})
    assert bad.json()["code"] == "url_address_not_allowed"
    assert client.patch(f"{URL}{endpoint_id}/", {"event_types": []}).status_code == 400
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        enabled=False, consecutive_failures=50, disabled_reason="50 consecutive failed attempts"
    )
    response = client.patch(
        f"{URL}{endpoint_id}/", {"enabled": True, "event_types": ["lease.created"]}
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["enabled"], body["consecutive_failures"], body["disabled_reason"]) == (
        True,
        0,
        "",
    )
    assert body["url"] == PUBLIC
    assert body["event_types"] == ["lease.created"]


def test_a_read_key_cannot_create(client_for: ClientFor, customer: Organization):
    response = _create(client_for(customer, scope="read"))
    assert response.status_code == 403


def test_deliveries_are_listed_with_attempts_and_can_be_redelivered(
    client_for: ClientFor, customer: Organization, receiver: Receiver
):
    client = client_for(customer)
    endpoint = client.post(URL, {"url": receiver.url, "event_types": ["invoice.paid"]}).json()
    event = emit(organization_id=customer.pk, type="invoice.paid", data={"invoice_id": 3})
    pump()
    deliveries = client.get(f"{URL}{endpoint['id']}/deliveries/").json()["results"]
    assert len(deliveries) == 1
    delivery = deliveries[0]
    assert delivery["event_id"] == event.message_id
    assert delivery["event_type"] == "invoice.paid"
    assert delivery["status"] == "succeeded"
    assert [attempt["status_code"] for attempt in delivery["attempts"]] == [200]
    response = client.post(f"{URL}{endpoint['id']}/deliveries/{delivery['id']}/redeliver/")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "pending"
    pump()
    assert receiver.ids() == [event.message_id, event.message_id]
    receiver.received[1].verified(endpoint["secret"])


def test_redelivery_to_a_disabled_endpoint_is_a_409(
    client_for: ClientFor, customer: Organization, receiver: Receiver
):
    client = client_for(customer)
    endpoint = client.post(URL, {"url": receiver.url, "event_types": ["invoice.paid"]}).json()
    emit(organization_id=customer.pk, type="invoice.paid", data={"invoice_id": 3})
    pump()
    delivery = client.get(f"{URL}{endpoint['id']}/deliveries/").json()["results"][0]
    client.patch(f"{URL}{endpoint['id']}/", {"enabled": False})
    response = client.post(f"{URL}{endpoint['id']}/deliveries/{delivery['id']}/redeliver/")
    assert response.status_code == 409
    assert response.json()["code"] == "endpoint_disabled"


def test_an_endpoint_can_be_deleted_with_its_log(client_for: ClientFor, customer: Organization):
    client = client_for(customer)
    endpoint_id = _create(client).json()["id"]
    assert client.delete(f"{URL}{endpoint_id}/").status_code == 204
    assert not WebhookEndpoint.objects.exists()


def _queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_the_lists_take_the_same_queries_for_one_row_or_many(
    client_for: ClientFor, customer: Organization, receiver: Receiver
):
    client = client_for(customer)
    endpoint = client.post(URL, {"url": receiver.url, "event_types": ["invoice.paid"]}).json()
    deliveries = f"{URL}{endpoint['id']}/deliveries/"
    emit(organization_id=customer.pk, type="invoice.paid", data={"invoice_id": 1})
    pump()
    one = (_queries(client, URL), _queries(client, deliveries))
    receiver.status = 500
    for invoice_id in range(2, 6):
        _create(client, event_types=["lease.ended"])  # more rows; never sent anything here
        emit(organization_id=customer.pk, type="invoice.paid", data={"invoice_id": invoice_id})
    pump(rounds=2)
    assert (_queries(client, URL), _queries(client, deliveries)) == one
