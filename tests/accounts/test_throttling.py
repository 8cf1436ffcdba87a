"""Throttles that hold: failed authentication per address, the admin login lockout, OPTIONS."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.choices import KeyScope
from accounts.models import ApiKey
from accounts.services import api_key_create, api_key_revoke

pytestmark = pytest.mark.django_db

ME = "/api/v1/organizations/me/"


def _get(raw_key: str, **extra: str):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw_key}")
    return client.get(ME, **extra)


@pytest.fixture
def few_failures(settings):
    settings.FAILED_AUTH_THROTTLE_RATE = "5/min"


def test_failed_authentication_is_throttled_per_address(customer, few_failures):
    good = api_key_create(organization=customer, name="good").raw_key
    expired = api_key_create(
        organization=customer, name="old", expires_at=timezone.now() + timedelta(seconds=30)
    )
    ApiKey.objects.filter(pk=expired.api_key.pk).update(expires_at=timezone.now())
    revoked = api_key_create(organization=customer, name="gone")
    api_key_revoke(api_key=revoked.api_key)

    wrong = ["ch_nothere_abcdef", "garbage", expired.raw_key, revoked.raw_key, "ch_x_y"]
    codes = [_get(raw).json()["code"] for raw in wrong]
    assert codes == [
        "invalid_api_key",
        "malformed_api_key",
        "expired_api_key",
        "revoked_api_key",
        "invalid_api_key",
    ]

    refused = _get("ch_nothere_abcdef")
    assert refused.status_code == 429
    assert refused.json()["code"] == "too_many_auth_failures"
    assert set(refused.json()) == {"code", "message", "detail"}
    assert 0 < int(refused["Retry-After"]) <= 60
    assert refused.json()["detail"]["retry_after_seconds"] == int(refused["Retry-After"])
    # A good key from that address waits too (else a guesser would learn which key is good),
    # and a forged X-Forwarded-For changes nothing: no proxy of ours is trusted by default.
    assert _get(good).status_code == 429
    assert _get(good, HTTP_X_FORWARDED_FOR="192.0.2.9").status_code == 429
    # Another address is not affected.
    assert _get(good, REMOTE_ADDR="192.0.2.10").status_code == 200


def test_requests_without_credentials_are_not_counted_as_failures(customer, few_failures):
    anonymous = APIClient()
    assert {anonymous.get(ME).json()["code"] for _ in range(8)} == {"not_authenticated"}
    good = api_key_create(organization=customer, name="good").raw_key
    assert _get(good).status_code == 200


def test_the_window_closes_after_its_period(customer, few_failures):
    good = api_key_create(organization=customer, name="good").raw_key
    with time_machine.travel(timezone.now(), tick=False) as clock:
        for _ in range(5):
            _get("ch_nothere_abcdef")
        assert _get(good).status_code == 429
        clock.shift(61)
        assert _get(good).status_code == 200


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_one_throttled(
    customer, few_failures, settings
):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    good = api_key_create(organization=customer, name="good").raw_key
    for _ in range(5):
        _get("ch_nothere_abcdef", HTTP_X_FORWARDED_FOR="192.0.2.7")
    # The client may prepend anything; the proxy's own entry (the last) is what counts.
    assert _get(good, HTTP_X_FORWARDED_FOR="10.9.9.9, 192.0.2.7").status_code == 429
    assert _get(good, HTTP_X_FORWARDED_FOR="192.0.2.8").status_code == 200


# ------------------------------------------------------------------ the admin login


LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture
def operator_user(db: None):
    return get_user_model().objects.create_superuser("ops-lead", "o@example.test", "right-pw")


def _login(client, password: str, **extra: str):
    return client.post(LOGIN, {"username": "ops-lead", "password": password}, **extra)


def test_the_admin_login_locks_a_username_and_address_after_five_wrong_passwords(
    client, operator_user
):
    for _ in range(4):
        answer = _login(client, "guess")
        assert answer.status_code == 200  # the login page again, with its error
    assert _login(client, "guess").status_code == 429  # the fifth wrong one locks
    locked = _login(client, "right-pw")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Login locked" in page and "ops-lead" in page and "15 minutes" in page
    assert "_auth_user_id" not in client.session
    # The same username from another address is not locked out (lockout by username+address),
    # so an attacker cannot lock the real operator out from elsewhere.
    other = _login(client, "right-pw", REMOTE_ADDR="192.0.2.20")
    assert other.status_code == 302


def test_the_lockout_ends_after_the_cool_off(client, operator_user):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        for _ in range(5):
            _login(client, "guess")
        assert _login(client, "right-pw").status_code == 429
        clock.shift(timedelta(minutes=16))
        assert _login(client, "right-pw").status_code == 302


def test_a_successful_login_resets_the_count(client, operator_user):
    for _ in range(4):
        _login(client, "guess")
    assert _login(client, "right-pw").status_code == 302
    client.logout()
    for _ in range(4):
        assert _login(client, "guess").status_code == 200
    assert _login(client, "right-pw").status_code == 302


def test_a_read_key_can_ask_options(customer, client_for):
    response = client_for(customer, scope=KeyScope.READ).options("/api/v1/leases/")
    assert response.status_code == 200
    assert "POST" not in response.json().get("actions", {})
