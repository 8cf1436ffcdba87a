"""OPTIONS is a read: any key may ask what an endpoint takes, minus the writes it may not make."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import OrganizationFactory
from tests.isolation_fixtures import api_routes

pytestmark = pytest.mark.django_db

ROUTES = [pytest.param(route, id=route.name) for route in api_routes()]


@pytest.mark.parametrize("scope", ["read", "write"])
@pytest.mark.parametrize("route", ROUTES)
def test_every_route_answers_options_to_any_key(client_for, route, scope):
    organization = OrganizationFactory(slug="both-ways", is_provider=True, is_customer=True)
    url = reverse(route.name, kwargs=dict.fromkeys(route.kwargs, 1))
    response = client_for(organization, scope=scope).options(url)
    assert response.status_code == 200, response.content[:300]


def test_a_read_key_is_shown_no_write_action_and_a_write_key_is(client_for, customer):
    read = client_for(customer, scope="read").options("/api/v1/quotes/")
    write = client_for(customer, scope="write").options("/api/v1/quotes/")
    assert read.status_code == write.status_code == 200
    assert "POST" not in read.json().get("actions", {})
    assert "POST" in write.json()["actions"]
