"""The leasing admin: leases with their allocations, the per-node allocation calendar, and offers
saved through offer_create / offer_update / offer_delete with the services' errors shown."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from inventory.models import GpuModel
from leasing.models import Hold, Offer
from tests.inventory.factories import make_node, make_site
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
    # Read-only: a lease changes through the services, never by saving its admin page.
    assert admin_client.post(f"/admin/leasing/lease/{lease['id']}/change/", {}).status_code == 403
    assert admin_client.post(f"/admin/leasing/lease/{lease['id']}/delete/", {}).status_code == 403


OFFERS = "/admin/leasing/offer/"


def _offer_form(provider, site, **overrides: Any) -> dict[str, Any]:
    """The offer add/change form as the admin posts it."""
    return {
        "provider": provider.pk,
        "site": site.pk,
        "gpu_model": GpuModel.objects.get(slug="h200-sxm").pk,
        "name": "h200 by the hour",
        "price_per_gpu_hour": "2.40",
        "currency": "USD",
        "reserved_ladder": '{"012": "25", "3": "10"}',
        "interruptible_price_per_gpu_hour": "",
        "preemption_notice_minutes": "5",
        "min_term_hours": "1",
        "available_from_0": "2026-01-01",
        "available_from_1": "00:00:00",
        "available_until_0": "",
        "available_until_1": "",
        "contract_template": "[]",
        "status": "published",
        **overrides,
    }


def _errors(response) -> Any:
    return response.context["adminform"].form.errors, _messages(response)


def _messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_an_offer_added_in_the_admin_is_created_by_offer_create(admin_client, provider):
    site = make_site(provider)
    node = make_node(site, gpu_model="h200-sxm")
    response = admin_client.post(f"{OFFERS}add/", _offer_form(provider, site, nodes=[node.pk]))
    assert response.status_code == 302, _errors(response)
    offer = Offer.objects.get()
    # The service's canonical ladder (the capacity search SQL relies on it), its pool.
    assert offer.reserved_ladder == {"3": "10", "12": "25"}
    assert list(offer.nodes.all()) == [node]


def test_an_offer_at_another_providers_site_is_refused_and_nothing_is_written(
    admin_client, provider, other_provider
):
    site = make_site(other_provider)
    response = admin_client.post(f"{OFFERS}add/", _offer_form(provider, site))
    assert response.status_code == 200  # the form again, with the service's error
    assert any("(site_not_found)" in message for message in _messages(response))
    assert "site" in response.context["adminform"].form.errors
    assert not Offer.objects.exists()


def test_an_offer_price_change_goes_through_offer_update(admin_client, provider):
    offer, _ = make_pool(provider)
    data = _offer_form(provider, offer.site, price_per_gpu_hour="3.10", name=offer.name)
    response = admin_client.post(f"{OFFERS}{offer.pk}/change/", data)
    assert response.status_code == 302, _errors(response)
    offer.refresh_from_db()
    assert offer.price_per_gpu_hour == Decimal("3.10")
    assert offer.reserved_ladder == {"3": "10", "12": "25"}


def test_a_change_the_service_refuses_shows_its_error_and_changes_nothing(
    admin_client, provider, other_provider
):
    offer, _ = make_pool(provider)
    foreign = make_node(make_site(other_provider), gpu_model="h200-sxm")
    data = _offer_form(provider, offer.site, price_per_gpu_hour="9.99", nodes=[foreign.pk])
    response = admin_client.post(f"{OFFERS}{offer.pk}/change/", data)
    assert response.status_code == 200
    assert any("(node_not_found)" in message for message in _messages(response))
    assert "nodes" in response.context["adminform"].form.errors
    offer.refresh_from_db()
    assert offer.price_per_gpu_hour == Decimal("2.40")  # nothing half-written


def test_an_offer_with_a_hold_is_not_deleted_and_its_hold_stays(
    admin_client, client_for, provider, customer
):
    offer, _ = make_pool(provider)
    body = {"offer": offer.pk, "gpu_count": 1, "start": next_hour().isoformat(), "hours": 2}
    hold = client_for(customer).post("/api/v1/holds/", body, format="json")
    assert hold.status_code == 201, hold.json()
    response = admin_client.post(f"{OFFERS}{offer.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403  # holds are never deleted by hand
    assert Offer.objects.filter(pk=offer.pk).exists()
    assert Hold.objects.filter(pk=hold.json()["id"]).exists()


def test_the_pause_action_goes_through_the_service(admin_client, provider):
    offer, _ = make_pool(provider)
    data = {"action": "pause", "_selected_action": [offer.pk]}
    response = admin_client.post(OFFERS, data, follow=True)
    assert response.status_code == 200
    offer.refresh_from_db()
    assert offer.status == "paused"


def test_an_unused_offer_is_deleted_through_offer_delete(admin_client, provider):
    offer, _ = make_pool(provider)
    response = admin_client.post(f"{OFFERS}{offer.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Offer.objects.exists()


def test_a_node_month_offer_in_the_admin_needs_its_monthly_rent(admin_client, provider):
    site = make_site(provider)
    make_node(site, gpu_model="h200-sxm")
    response = admin_client.post(
        f"{OFFERS}add/", _offer_form(provider, site, price_unit="node_month")
    )
    assert response.status_code == 200  # the form again, with the rule's error
    assert "price_per_node_month" in response.context["adminform"].form.errors
    assert not Offer.objects.exists()
    response = admin_client.post(
        f"{OFFERS}add/",
        _offer_form(provider, site, price_unit="node_month", price_per_node_month="14500"),
    )
    assert response.status_code == 302, _errors(response)
    offer = Offer.objects.get()
    assert (offer.price_unit, offer.price_per_node_month) == ("node_month", Decimal("14500"))
