"""Strict query parameters: a list or search refuses a parameter it does not know, naming it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.leasing.factories import make_offer, window

pytestmark = pytest.mark.django_db

OFFERS = "/api/v1/offers/"
CAPACITY = "/api/v1/capacity/"


def test_a_list_with_an_unknown_parameter_is_a_400_naming_it(client_for, customer, provider):
    make_offer(provider)
    response = client_for(customer).get(OFFERS, {"gpu_modle": "h200-sxm", "currency": "USD"})
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "unknown_query_parameter"
    assert body["detail"]["field"] == "gpu_modle"
    assert body["detail"]["unknown"] == ["gpu_modle"]
    assert "gpu_model" in body["detail"]["known"]
    assert "gpu_modle" in body["message"]


def test_a_list_takes_its_filters_ordering_pages_and_format(client_for, customer, provider):
    offer = make_offer(provider)
    query = {
        "gpu_model": "h200-sxm",
        "price_per_gpu_hour__lte": "10",
        "ordering": "-price_per_gpu_hour",
        "page_size": "5",
        "format": "json",
    }
    response = client_for(customer).get(OFFERS, query)
    assert response.status_code == 200, response.json()
    assert [row["id"] for row in response.json()["results"]] == [offer.pk]


def test_the_cursor_of_a_next_page_still_works(client_for, customer, provider):
    offers = [make_offer(provider) for _ in range(3)]
    client = client_for(customer)
    first = client.get(OFFERS, {"page_size": "2", "gpu_model": "h200-sxm"}).json()
    assert first["next"] is not None
    following = urlparse(first["next"])
    assert set(parse_qs(following.query)) == {"cursor", "page_size", "gpu_model"}
    second = client.get(f"{following.path}?{following.query}")
    assert second.status_code == 200, second.json()
    seen = [row["id"] for row in first["results"] + second.json()["results"]]
    assert sorted(seen) == sorted(offer.pk for offer in offers)


def test_capacity_search_refuses_gpu_count_and_applies_min_gpus(client_for, customer, provider):
    make_offer(provider)
    start, end = window(24)
    query = {"start": start.isoformat(), "end": end.isoformat(), "gpu_model": "h200-sxm"}
    client = client_for(customer)

    refused = client.get(CAPACITY, {**query, "gpu_count": "4"})
    assert refused.status_code == 400, refused.json()
    assert refused.json()["code"] == "unknown_query_parameter"
    assert refused.json()["detail"]["unknown"] == ["gpu_count"]
    assert "min_gpus" in refused.json()["detail"]["known"]

    counted = client.get(CAPACITY, {**query, "min_gpus": "4"})
    assert counted.status_code == 200, counted.json()
    row = counted.json()["results"][0]
    assert row["priced_gpu_count"] == 4
    assert row["price_explanation"].startswith("4 GPUs x 24 h")


def test_a_nul_character_in_a_query_parameter_is_a_400(client_for, customer):
    response = client_for(customer).get(OFFERS, {"name": "a\x00b"})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_characters"


def test_an_action_that_reads_parameters_names_the_ones_it_does_not_read(client_for, customer):
    response = client_for(customer).get(
        "/api/v1/market-prices/series/", {"gpu_model": "h200-sxm", "source": "x"}
    )
    assert response.status_code == 400, response.json()
    assert response.json()["detail"]["unknown"] == ["source"]


def test_an_object_read_is_not_refused_for_its_parameters(client_for, customer, provider):
    offer = make_offer(provider)
    response = client_for(customer).get(f"{OFFERS}{offer.pk}/", {"anything": "1"})
    assert response.status_code == 200, response.json()


def test_the_schema_documents_the_400_of_a_list(client_for, customer):
    schema = client_for(customer).get("/api/schema/", {"format": "json"}).json()
    answer = schema["paths"]["/api/v1/offers/"]["get"]["responses"]["400"]
    assert "unknown_query_parameter" in answer["description"]
