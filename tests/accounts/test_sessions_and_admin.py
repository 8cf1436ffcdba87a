"""Session users act for their organization; the admin creates keys and shows them once."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from accounts.choices import Role
from accounts.models import ApiKey
from accounts.services import hash_api_key, membership_set
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_a_session_member_reads_their_organization(client, customer):
    user = UserFactory()
    membership_set(user=user, organization=customer, role=Role.VIEWER)
    client.force_login(user)
    response = client.get("/api/v1/organizations/me/")
    assert response.status_code == 200
    assert response.json()["organization"]["slug"] == "acme-ai"
    assert response.json()["can_write"] is False


def test_a_user_without_organization_is_403(client):
    client.force_login(UserFactory())
    response = client.get("/api/v1/organizations/me/")
    assert response.status_code == 403
    assert response.json()["code"] == "no_organization"


def test_the_admin_creates_a_key_and_shows_the_raw_value_once(client, customer):
    admin_user = get_user_model().objects.create_superuser("root", "r@example.test", "pw")
    client.force_login(admin_user)
    response = client.post(
        "/admin/accounts/apikey/add/",
        {
            "organization": customer.pk,
            "name": "from-admin",
            "scope": "read",
            "expires_at_0": "",
            "expires_at_1": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    text = response.content.decode()
    match = re.search(r"(ch_[0-9a-f]{8}_[A-Za-z0-9_\-]+)", text)
    assert match, text[:2000]
    key = ApiKey.objects.get(name="from-admin")
    assert key.key_hash == hash_api_key(match.group(1))
    # The change page never shows it again.
    page = client.get(f"/admin/accounts/apikey/{key.pk}/change/").content.decode()
    assert match.group(1) not in page
