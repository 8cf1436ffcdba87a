"""Sites through the API: rules, tenancy, hidden costs, operators acting for a provider."""

from __future__ import annotations

import pytest

from inventory.models import Site
from tests.inventory.factories import site_payload

pytestmark = pytest.mark.django_db

SITES = "/api/v1/sites/"
COSTS = {"pue", "power_price_per_kwh", "power_currency", "opex_per_node_month", "opex_currency"}


def test_a_provider_creates_a_site(provider, client_for):
    response = client_for(provider).post(SITES, site_payload(country="au"), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["organization"] == provider.slug
    assert response.json()["country"] == "AU"
    assert response.json()["pue"] == "1.350"


@pytest.mark.parametrize(
    ("overrides", "code", "field"),
    [
        ({"pue": "0.95"}, "pue_below_one", "pue"),
        ({"pue": "7.5"}, "pue_too_high", "pue"),
        ({"pue": "130"}, "invalid", "pue"),
        ({"country": "XZ"}, "invalid_country", "country"),
        ({"country": "Australia"}, "invalid_country", "country"),
        ({"power_currency": "AUX"}, "invalid_currency", "power_currency"),
        ({"power_price_per_kwh": "-0.1"}, "negative_price", "power_price_per_kwh"),
        ({"opex_per_node_month": "-5"}, "negative_opex", "opex_per_node_month"),
        ({"tier": "tier_9"}, "invalid_choice", "tier"),
        ({"name": ""}, "invalid", "name"),
    ],
)
def test_bad_site_input_is_400_with_a_code_and_field(provider, client_for, overrides, code, field):
    response = client_for(provider).post(SITES, site_payload(**overrides), format="json")
    assert response.status_code == 400, response.json()
    assert (response.json()["code"], response.json()["detail"]["field"]) == (code, field)
    assert not Site.objects.exists()


def test_a_body_that_is_not_an_object_is_400(provider, client_for):
    response = client_for(provider).post(SITES, [1, 2], format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid"


def test_site_names_are_unique_per_provider(provider, other_provider, site, client_for):
    assert client_for(provider).post(SITES, site_payload(), format="json").status_code == 409
    assert client_for(other_provider).post(SITES, site_payload(), format="json").status_code == 201


def test_another_providers_site_is_404(provider, other_site, client_for):
    client = client_for(provider)
    url = f"{SITES}{other_site.pk}/"
    assert client.get(url).status_code == 404
    assert client.patch(url, {"city": "Ipoh"}, format="json").status_code == 404
    assert client.delete(url).status_code == 404
    assert client.get(SITES).json()["results"] == []


def test_a_customer_sees_sites_without_their_costs(customer, site, client_for):
    rows = client_for(customer).get(SITES).json()["results"]
    assert [row["id"] for row in rows] == [site.pk]
    assert not COSTS & set(rows[0])
    assert client_for(customer).post(SITES, site_payload(), format="json").status_code == 403


def test_a_change_is_checked_as_a_whole(provider, site, client_for):
    client = client_for(provider)
    response = client.patch(f"{SITES}{site.pk}/", {"pue": "0.9"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "pue_below_one"
    response = client.patch(f"{SITES}{site.pk}/", {"pue": "1.2"}, format="json")
    assert response.status_code == 200 and response.json()["pue"] == "1.200"
    assert site.history.count() == 2


def test_a_site_with_nodes_cannot_be_deleted(provider, site, node, client_for):
    response = client_for(provider).delete(f"{SITES}{site.pk}/")
    assert response.status_code == 409 and response.json()["code"] == "site_has_nodes"


def test_an_empty_site_can_be_deleted(provider, site, client_for):
    assert client_for(provider).delete(f"{SITES}{site.pk}/").status_code == 204


def test_an_operator_creates_a_site_for_a_named_provider(operator, provider, customer, client_for):
    client = client_for(operator)
    response = client.post(SITES, site_payload(), format="json")
    assert response.status_code == 400 and response.json()["code"] == "organization_required"
    response = client.post(SITES, site_payload(organization=customer.slug), format="json")
    assert response.status_code == 400 and response.json()["code"] == "not_a_provider"
    response = client.post(SITES, site_payload(organization=provider.slug), format="json")
    assert response.status_code == 201 and response.json()["organization"] == provider.slug


def test_a_provider_cannot_create_a_site_for_another(provider, other_provider, client_for):
    response = client_for(provider).post(
        SITES, site_payload(organization=other_provider.slug), format="json"
    )
    assert response.status_code == 404 and response.json()["code"] == "organization_not_found"


def test_sites_filter_by_country_and_tier(operator, site, other_site, client_for):
    client = client_for(operator)
    assert [r["id"] for r in client.get(f"{SITES}?country=MY").json()["results"]] == [other_site.pk]
    assert len(client.get(f"{SITES}?tier=tier_3").json()["results"]) == 2
