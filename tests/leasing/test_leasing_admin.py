"""The leasing admin: leases with their allocations, and the per-node allocation calendar."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.test", "pw"))
    return client


def test_the_calendar_shows_which_lease_has_each_gpu(admin_client, client_for, provider, customer):
    offer, nodes = make_pool(provider, gpu_count=4)
    lease = (
        client_for(customer)
        .post(
            "/api/v1/leases/",
            {"offer": offer.pk, "gpu_count": 2, "start": next_hour().isoformat(), "hours": 30},
            format="json",
        )
        .json()
    )
    page = admin_client.get(f"/admin/leasing/allocation/calendar/?node={nodes[0].pk}&days=3")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"lease {lease['id']} ({lease['contract']})" in text
    assert text.count("free") >= 2  # the two GPUs nobody leased


def test_the_lease_page_lists_allocations_and_acceptance(
    admin_client, client_for, provider, customer
):
    offer, _ = make_pool(provider)
    lease = (
        client_for(customer)
        .post(
            "/api/v1/leases/",
            {"offer": offer.pk, "gpu_count": 1, "start": next_hour().isoformat(), "hours": 2},
            format="json",
        )
        .json()
    )
    listing = admin_client.get("/admin/leasing/lease/")
    assert listing.status_code == 200
    page = admin_client.get(f"/admin/leasing/lease/{lease['id']}/change/")
    assert page.status_code == 200
    assert "Acceptance runs" in page.content.decode()
    assert admin_client.get("/admin/leasing/allocation/").status_code == 200
