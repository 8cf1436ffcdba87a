"""Holds cost nothing, so each organization's are limited: GPUs held at once, active holds at
once, holds placed per hour (re-holding counts); operators override them in the admin. Through
the API with real keys; the race test runs real transactions on their own connections."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.utils import timezone

from leasing.choices import HoldStatus
from leasing.models import Hold, HoldLimit
from tests.leasing.pool import make_pool, next_hour
from tests.leasing.test_lease_concurrency import race

HOLDS = "/api/v1/holds/"


def hold_body(offer, count, hours=24):
    return {"offer": offer.pk, "gpu_count": count, "start": next_hour().isoformat(), "hours": hours}


@pytest.mark.django_db
def test_two_big_holds_can_no_longer_empty_a_window(client_for, provider, customer, other_customer):
    # The reported abuse: holds of 23 and 12 GPUs took a 24-hour window from everybody else.
    offer, _ = make_pool(provider, nodes=5, gpu_count=8)
    client = client_for(customer)
    big = client.post(HOLDS, hold_body(offer, 23), format="json")
    assert (big.status_code, big.json()["code"]) == (409, "hold_limit_gpus")
    assert big.json()["detail"] == {"limit": 16, "held": 0, "requested": 23}
    assert "limit of 16 GPUs" in big.json()["message"]
    first = client.post(HOLDS, hold_body(offer, 12), format="json")
    assert first.status_code == 201, first.json()
    second = client.post(HOLDS, hold_body(offer, 8), format="json")
    assert (second.status_code, second.json()["code"]) == (409, "hold_limit_gpus")
    assert second.json()["detail"] == {"limit": 16, "held": 12, "requested": 8}
    assert client.post(HOLDS, hold_body(offer, 4), format="json").status_code == 201
    # Everyone else still finds the window: 40 GPUs, 16 held, their own limit untouched.
    theirs = client_for(other_customer).post(HOLDS, hold_body(offer, 16), format="json")
    assert theirs.status_code == 201, theirs.json()
    assert Hold.objects.filter(customer=customer).count() == 2


@pytest.mark.django_db
def test_a_fourth_active_hold_waits_until_one_is_released(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=1, gpu_count=8)
    client = client_for(customer)
    holds = [client.post(HOLDS, hold_body(offer, 1), format="json").json() for _ in range(3)]
    fourth = client.post(HOLDS, hold_body(offer, 1), format="json")
    assert (fourth.status_code, fourth.json()["code"]) == (409, "hold_limit_active")
    assert fourth.json()["detail"] == {"limit": 3, "active": 3}
    assert client.post(f"{HOLDS}{holds[0]['id']}/release").status_code == 200
    assert client.post(HOLDS, hold_body(offer, 1), format="json").status_code == 201
    # A hold turned into a lease no longer counts either.
    lease = client.post("/api/v1/leases/", {"hold": holds[1]["id"]}, format="json")
    assert lease.status_code == 201, lease.json()
    assert client.post(HOLDS, hold_body(offer, 1), format="json").status_code == 201


@pytest.mark.django_db
def test_an_expired_hold_no_longer_counts(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=2, gpu_count=8)
    client = client_for(customer)
    assert client.post(HOLDS, hold_body(offer, 16), format="json").status_code == 201
    refused = client.post(HOLDS, hold_body(offer, 1), format="json")
    assert refused.json()["code"] == "hold_limit_gpus"
    with time_machine.travel(timezone.now() + timedelta(minutes=11), tick=False):
        again = client.post(HOLDS, hold_body(offer, 16, hours=20), format="json")
    assert again.status_code == 201, again.json()
    statuses = Counter(Hold.objects.values_list("status", flat=True))
    assert statuses == {HoldStatus.EXPIRED: 1, HoldStatus.ACTIVE: 1}


@pytest.mark.django_db
def test_re_holding_the_same_window_counts_against_the_hourly_rate(
    client_for, provider, customer, settings
):
    settings.HOLD_MAX_PER_HOUR = 4
    offer, _ = make_pool(provider, nodes=1, gpu_count=8)
    client = client_for(customer)
    body = hold_body(offer, 8)
    start = timezone.now()
    for _ in range(4):
        hold = client.post(HOLDS, body, format="json")
        assert hold.status_code == 201, hold.json()
        assert client.post(f"{HOLDS}{hold.json()['id']}/release").status_code == 200
    refused = client.post(HOLDS, body, format="json")
    assert (refused.status_code, refused.json()["code"]) == (429, "hold_rate_limited")
    retry_after = int(refused["Retry-After"])
    assert 3500 < retry_after <= 3600
    assert refused.json()["detail"] == {
        "retry_after_seconds": retry_after,
        "limit": 4,
        "used": 4,
    }
    assert "limit is 4 per hour" in refused.json()["message"]
    with time_machine.travel(start + timedelta(hours=1, seconds=5), tick=False):
        assert client.post(HOLDS, hold_body(offer, 8), format="json").status_code == 201


@pytest.mark.django_db
def test_an_operator_overrides_one_organizations_limits_in_the_admin(
    client, client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider, nodes=5, gpu_count=8)
    admin = get_user_model().objects.create_superuser("root", "root@example.test", "pw")
    client.force_login(admin)
    added = client.post(
        "/admin/leasing/holdlimit/add/",
        {
            "organization": customer.pk,
            "max_gpus": "32",
            "max_active": "",
            "max_per_hour": "",
            "reason": "Training cluster bring-up, agreed with sales.",
        },
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    limit = HoldLimit.objects.get(organization=customer)
    assert (limit.max_gpus, limit.max_active) == (32, None)
    assert limit.history.get().history_change_reason.startswith("admin:root:")
    assert client_for(customer).post(HOLDS, hold_body(offer, 23), format="json").status_code == 201
    # The override is this organization's only; the others keep the settings.
    other = client_for(other_customer).post(HOLDS, hold_body(offer, 17), format="json")
    assert other.json()["code"] == "hold_limit_gpus"
    # Zero shuts one organization out of holds; deleting the override restores the settings.
    changed = client.post(
        f"/admin/leasing/holdlimit/{limit.pk}/change/",
        {"max_gpus": "0", "max_active": "", "max_per_hour": "", "reason": "Abuse under review."},
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    blocked = client_for(customer).post(HOLDS, hold_body(offer, 1), format="json")
    assert blocked.json()["detail"] == {"limit": 0, "held": 23, "requested": 1}
    deleted = client.post(f"/admin/leasing/holdlimit/{limit.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert not HoldLimit.objects.exists()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_racing_holds_never_pass_the_gpu_limit(client_for, provider, customer, settings):
    """Twelve requests of 4 GPUs at the same moment against a limit of 16: four get through."""
    settings.HOLD_MAX_ACTIVE = 100
    offer, _ = make_pool(provider, nodes=8, gpu_count=8)
    clients = [client_for(customer) for _ in range(12)]
    body = hold_body(offer, 4)
    responses = race(clients, lambda client, i: client.post(HOLDS, body, format="json"))
    codes = Counter((r.status_code, r.json().get("code")) for r in responses)
    assert codes == {(201, None): 4, (409, "hold_limit_gpus"): 8}, codes
    held = Hold.objects.filter(customer=customer, status=HoldStatus.ACTIVE)
    assert sum(held.values_list("gpu_count", flat=True)) == 16


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_racing_holds_never_pass_the_active_or_hourly_limits(
    client_for, provider, customer, settings
):
    offer, _ = make_pool(provider, nodes=2, gpu_count=8)
    clients = [client_for(customer) for _ in range(10)]
    responses = race(clients, lambda client, i: client.post(HOLDS, hold_body(offer, 1), "json"))
    codes = Counter((r.status_code, r.json().get("code")) for r in responses)
    assert codes == {(201, None): 3, (409, "hold_limit_active"): 7}, codes

    settings.HOLD_MAX_ACTIVE = 100
    settings.HOLD_MAX_PER_HOUR = 5  # three placed already
    responses = race(clients, lambda client, i: client.post(HOLDS, hold_body(offer, 1), "json"))
    codes = Counter((r.status_code, r.json().get("code")) for r in responses)
    assert codes == {(201, None): 2, (429, "hold_rate_limited"): 8}, codes
    assert Hold.objects.filter(customer=customer).count() == 5
