"""API keys: hashing at rest, scopes, expiry, revocation, tenant isolation, throttling."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.choices import KeyScope, Role
from accounts.errors import Forbidden
from accounts.models import ApiKey
from accounts.services import (
    api_key_authenticate,
    api_key_create,
    hash_api_key,
    membership_set,
)
from accounts.throttling import ApiKeyRateThrottle
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ME = "/api/v1/organizations/me/"
KEYS = "/api/v1/api-keys/"


def _client(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw_key}")
    return client


def test_the_raw_key_is_stored_nowhere_in_the_database(customer):
    issued = api_key_create(organization=customer, name="ci", scope=KeyScope.WRITE)
    secret = issued.raw_key.split("_", 2)[2]
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(k)::text FROM accounts_apikey k")
        rows = [row[0] for row in cursor.fetchall()]
    assert rows
    assert all(secret not in row and issued.raw_key not in row for row in rows)
    assert ApiKey.objects.get().key_hash == hash_api_key(issued.raw_key)


def test_a_valid_key_reads_its_own_organization(customer):
    issued = api_key_create(organization=customer, name="ci")
    response = _client(issued.raw_key).get(ME)
    assert response.status_code == 200
    assert response.json()["organization"]["slug"] == "acme-ai"
    assert response.json()["organization"]["kinds"] == ["customer"]
    assert response.json()["can_write"] is False


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "not_authenticated"),
        ("Api-Key ch_nothere_abcdef", "invalid_api_key"),
        ("Api-Key garbage", "malformed_api_key"),
        ("Api-Key", "malformed_api_key"),
        ("Api-Key a b", "malformed_api_key"),
    ],
)
def test_a_missing_unknown_or_malformed_key_gets_401_with_a_code(header, code):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(ME)
    assert response.status_code == 401
    assert response.json()["code"] == code
    assert set(response.json()) == {"code", "message", "detail"}


def test_a_revoked_key_gets_401(customer, client_for):
    issued = api_key_create(organization=customer, name="old", scope=KeyScope.WRITE)
    admin = client_for(customer)
    response = admin.post(f"{KEYS}{issued.api_key.pk}/revoke/")
    assert response.status_code == 200
    assert response.json()["revoked_at"] is not None
    response = _client(issued.raw_key).get(ME)
    assert response.status_code == 401
    assert response.json()["code"] == "revoked_api_key"


def test_an_expired_key_gets_401(customer):
    issued = api_key_create(
        organization=customer, name="short", expires_at=timezone.now() + timedelta(seconds=30)
    )
    ApiKey.objects.filter(pk=issued.api_key.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = _client(issued.raw_key).get(ME)
    assert response.status_code == 401
    assert response.json()["code"] == "expired_api_key"


def test_a_read_scoped_key_cannot_write(customer, client_for):
    reader = client_for(customer, scope=KeyScope.READ)
    response = reader.post(KEYS, {"name": "new"}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert reader.get(KEYS).status_code == 200


def test_creating_a_key_shows_it_once_and_lists_never_show_it(customer, client_for):
    writer = client_for(customer)
    response = writer.post(KEYS, {"name": "deploy", "scope": "write"}, format="json")
    assert response.status_code == 201
    raw_key = response.json()["key"]
    assert raw_key.startswith("ch_")
    listed = writer.get(KEYS).json()["results"]
    assert {row["name"] for row in listed} == {"test", "deploy"}
    assert all("key" not in row and raw_key not in str(row) for row in listed)
    assert _client(raw_key).get(ME).json()["can_write"] is True


def test_another_organizations_key_is_404_to_read_and_revoke(customer, other_customer, client_for):
    theirs = api_key_create(organization=other_customer, name="theirs").api_key
    mine = client_for(customer)
    assert mine.get(f"{KEYS}{theirs.pk}/").status_code == 404
    response = mine.post(f"{KEYS}{theirs.pk}/revoke/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
    assert theirs.pk not in {row["id"] for row in mine.get(KEYS).json()["results"]}


def test_last_used_time_is_recorded(customer):
    issued = api_key_create(organization=customer, name="ci")
    assert issued.api_key.last_used_at is None
    api_key_authenticate(raw_key=issued.raw_key)
    issued.api_key.refresh_from_db()
    assert issued.api_key.last_used_at is not None


def test_a_key_past_its_rate_gets_429(customer, client_for, monkeypatch):
    rates = {**ApiKeyRateThrottle.THROTTLE_RATES, "api_key": "3/min"}
    monkeypatch.setattr(ApiKeyRateThrottle, "THROTTLE_RATES", rates)
    cache.clear()
    try:
        client = client_for(customer)
        codes = [client.get(ME).status_code for _ in range(4)]
        response = client.get(ME)
    finally:
        cache.clear()
    assert codes == [200, 200, 200, 429]
    assert response.status_code == 429
    assert response.json()["code"] == "throttled"
    assert response.json()["detail"]["retry_after_seconds"] > 0


def test_malformed_json_is_a_400_with_a_code(customer, client_for):
    response = client_for(customer).post(KEYS, data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_request"


def test_an_invalid_scope_is_a_field_error(customer, client_for):
    response = client_for(customer).post(KEYS, {"name": "x", "scope": "admin"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert "scope" in response.json()["detail"]


def test_the_create_api_key_command_prints_a_working_key(customer, capsys):
    call_command("create_api_key", "--org", "acme-ai", "--scope", "write")
    raw_key = capsys.readouterr().out.strip()
    assert _client(raw_key).get(ME).json()["can_write"] is True


def test_the_create_api_key_command_rejects_an_unknown_org():
    with pytest.raises(CommandError, match="No organization"):
        call_command("create_api_key", "--org", "nope")


# ------------------------------------------------------------------ keys minting keys


def _dt(minutes: float):
    return timezone.now() + timedelta(minutes=minutes)


def _in(minutes: float) -> str:
    return _dt(minutes).isoformat()


def test_an_expiring_key_cannot_mint_a_key_that_never_expires_or_expires_later(customer):
    parent = api_key_create(
        organization=customer, name="short", scope=KeyScope.WRITE, expires_at=_dt(2)
    )
    client = _client(parent.raw_key)

    for body in ({"name": "forever", "scope": "write"}, {"name": "later", "expires_at": _in(3)}):
        response = client.post(KEYS, body, format="json")
        assert response.status_code == 403, response.json()
        assert response.json()["code"] == "key_outlives_parent"
        assert set(response.json()) == {"code", "message", "detail"}
    assert ApiKey.objects.count() == 1

    response = client.post(KEYS, {"name": "child", "expires_at": _in(1)}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["created_by_key"] == parent.api_key.pk
    same_end = parent.api_key.expires_at.isoformat()
    assert (
        client.post(KEYS, {"name": "twin", "expires_at": same_end}, format="json").status_code
        == 201
    )


def test_a_key_cannot_mint_a_wider_scope_than_its_own(customer):
    reader = api_key_create(organization=customer, name="reader", scope=KeyScope.READ)
    response = _client(reader.raw_key).post(KEYS, {"name": "w", "scope": "write"}, format="json")
    assert response.status_code == 403
    # A read key writes nothing at all; the service would refuse a wider scope regardless.
    assert response.json()["code"] == "insufficient_scope"
    with pytest.raises(Forbidden) as refused:
        api_key_create(
            organization=customer, name="w", scope=KeyScope.WRITE, created_by_key=reader.api_key
        )
    assert refused.value.code == "scope_wider_than_parent"
    assert ApiKey.objects.count() == 1


def test_keys_record_the_key_that_created_them_in_the_api_and_the_admin(customer, client):
    parent = api_key_create(organization=customer, name="deploy", scope=KeyScope.WRITE)
    created = _client(parent.raw_key).post(KEYS, {"name": "ci", "scope": "read"}, format="json")
    assert created.status_code == 201
    child = ApiKey.objects.get(pk=created.json()["id"])
    assert child.created_by_key_id == parent.api_key.pk and child.created_by_id is None

    listed = {row["name"]: row for row in _client(parent.raw_key).get(KEYS).json()["results"]}
    assert listed["ci"]["created_by_key"] == parent.api_key.pk
    assert listed["deploy"]["created_by_key"] is None

    root = get_user_model().objects.create_superuser("root", "r@example.test", "pw")
    client.force_login(root)
    page = client.get(f"/admin/accounts/apikey/{child.pk}/change/").content.decode()
    assert "Created by key" in page and str(parent.api_key) in page
    assert str(parent.api_key) in client.get("/admin/accounts/apikey/").content.decode()


def test_the_admin_cannot_let_a_child_key_outlive_its_parent(customer, client):
    expiry = timezone.now() + timedelta(days=7)
    parent = api_key_create(
        organization=customer, name="deploy", scope=KeyScope.WRITE, expires_at=expiry
    )
    child = api_key_create(
        organization=customer,
        name="ci",
        scope=KeyScope.READ,
        expires_at=expiry,
        created_by_key=parent.api_key,
    ).api_key
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.test", "pw"))
    later = expiry + timedelta(days=30)
    data = {"name": "ci renamed", "expires_at_0": later.date().isoformat(), "expires_at_1": "00:00"}
    response = client.post(f"/admin/accounts/apikey/{child.pk}/change/", data)
    assert response.status_code == 200  # the form again, with the service's refusal
    messages = [str(message) for message in response.context["messages"]]
    assert any("(key_outlives_parent)" in message for message in messages)
    child.refresh_from_db()
    assert (child.name, child.expires_at) == ("ci", expiry)  # nothing half-written


def test_a_session_member_creates_keys_as_their_role_allows(customer, client):
    user = UserFactory()
    membership_set(user=user, organization=customer, role=Role.MEMBER)
    client.force_login(user)
    response = client.post(
        KEYS, {"name": "mine", "scope": "write"}, content_type="application/json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["expires_at"] is None and response.json()["created_by_key"] is None


def test_revoking_a_key_revokes_the_keys_it_created(customer, client_for):
    parent = api_key_create(organization=customer, name="leaked", scope=KeyScope.WRITE)
    child = _client(parent.raw_key).post(KEYS, {"name": "spare", "scope": "write"}, format="json")
    grandchild = _client(child.json()["key"]).post(KEYS, {"name": "spare2"}, format="json")
    assert grandchild.status_code == 201

    response = client_for(customer).post(f"{KEYS}{parent.api_key.pk}/revoke/")
    assert response.status_code == 200

    for raw in (child.json()["key"], grandchild.json()["key"]):
        answer = _client(raw).get(ME)
        assert answer.status_code == 401 and answer.json()["code"] == "revoked_api_key"
