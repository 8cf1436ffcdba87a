"""What the schema fuzzer found, pinned down: each was a 500, an HTML answer or a wrong schema."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from tests.inventory.factories import make_node, make_site
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


# ------------------------------------------------------------------ 500s on odd input


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/invoices/?start={}",
        "/api/v1/credit-notes/?end={}",
        "/api/v1/quotes/?created_at__lte={}",
        "/api/v1/usage/rollups/?start={}",
        "/api/v1/contracts/?term_start__gte={}",
        "/api/v1/outages/?start={}",
    ],
)
def test_a_date_time_filter_with_an_offset_postgresql_refuses_is_read_in_utc(
    customer, provider, client_for, url
):
    # Python takes UTC offsets up to ±23:59, PostgreSQL only up to ±15:59: this was a 500.
    client = client_for(provider if "outages" in url else customer)
    assert client.get(url.format("2026-03-01T10:00:00-21:02")).status_code == 200
    # ...and a date-time with no UTC value (before year 1) is a 400, not an OverflowError.
    response = client.get(url.format("0001-01-01T00:00:00%2B01:00"))
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid"


def test_an_outage_start_with_a_far_offset_is_stored_in_utc(provider, client_for):
    node = make_node(make_site(provider))
    body = {"node": node.pk, "kind": "planned", "start": "2030-01-01T00:00:00-21:00"}
    response = client_for(provider).post("/api/v1/outages/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["start"] == "2030-01-01T21:00:00Z"
    body["start"] = "0001-01-01T00:00:00+01:00"
    response = client_for(provider).post("/api/v1/outages/", body, format="json")
    assert response.status_code == 400 and response.json()["detail"]["field"] == "start"


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("get", "/api/v1/gpu-models/h200%00/", None),
        ("get", "/api/v1/market-prices/fair-rate/?gpu_model=%00", None),
        ("get", "/api/v1/market-prices/series/?gpu_model=h200-sxm&currency=U%00D", None),
        ("get", "/api/v1/capacity/?start=2030-01-01T00:00:00Z&hours=2&country=A%00", None),
        ("post", "/api/v1/nodes/import?organization=demo%00", []),
        (
            "post",
            "/api/v1/sites/",
            {
                "name": "Null\u0000Site",
                "country": "AU",
                "city": "Perth",
                "pue": "1.2",
                "power_price_per_kwh": "0.1",
                "power_currency": "AUD",
                "opex_per_node_month": "100",
                "opex_currency": "AUD",
            },
        ),
    ],
)
def test_a_nul_character_is_a_400_wherever_it_reaches_the_database(
    provider, operator, client_for, method, url, body
):
    # PostgreSQL stores no U+0000 in text or jsonb: the query failed with a 500.
    client = client_for(operator if "organization=" in url else provider)
    response = (
        getattr(client, method)(url, body, format="json")
        if body is not None
        else (getattr(client, method)(url))
    )
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_characters"


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/v1/capacity/?start=9999-12-31T20:00:00Z&hours=10", None),
        ("/api/v1/capacity/?start=9999-12-31T20:00:00Z&term_months=3&pricing_mode=reserved", None),
        ("/api/v1/quotes/", {"gpu_model": "h200-sxm", "gpu_count": 1, "hours": "10"}),
        ("/api/v1/holds/", {"gpu_count": 1, "hours": 10}),
        ("/api/v1/leases/", {"gpu_count": 1, "term_months": 3, "pricing_mode": "reserved"}),
    ],
)
def test_a_window_that_would_end_after_the_year_9999_is_a_400(
    provider, customer, client_for, url, body
):
    # start + hours (or + months) past datetime.max raised OverflowError / ValueError: a 500.
    client = client_for(customer)
    if body is None:
        response = client.get(url)
    else:
        offer, _ = make_pool(provider)
        body = {"start": "9999-12-31T20:00:00Z", **body}
        if "quotes" not in url:
            body["offer"] = offer.pk
        response = client.post(url, body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "window_out_of_range"


def test_a_lease_cannot_be_extended_past_the_ten_years_a_new_lease_may_last(
    provider, customer, client_for
):
    # Extended to the year 9999, its contract's next billing period no longer existed: 500s.
    offer, _ = make_pool(provider)
    client = client_for(customer)
    start = next_hour()
    body = {"offer": offer.pk, "gpu_count": 1, "start": start.isoformat(), "hours": 10}
    lease = client.post("/api/v1/leases/", body, format="json").json()
    response = client.post(
        f"/api/v1/leases/{lease['id']}/extend/", {"end": "9999-12-31T23:00:00Z"}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "window_too_long"


def test_replacing_a_gpu_whose_allocation_already_ended_is_409(provider, customer, client_for):
    # The period [now, end) of the replacement was empty: PostgreSQL refused the range, a 500.
    offer, _ = make_pool(provider, nodes=2, gpu_count=4)
    start = next_hour()
    body = {"offer": offer.pk, "gpu_count": 1, "start": start.isoformat(), "hours": 1}
    lease = client_for(customer).post("/api/v1/leases/", body, format="json").json()
    failed_gpu = lease["allocations"][0]["gpu_id"]
    with time_machine.travel(start + timedelta(hours=2)):  # before the job that ends leases
        response = client_for(provider).post(
            f"/api/v1/leases/{lease['id']}/replace-gpu/", {"gpu": failed_gpu}, format="json"
        )
    assert response.status_code == 409, response.json()
    assert response.json()["code"] == "allocation_ended"


def test_a_price_series_ending_in_the_year_1_starts_in_the_year_1(customer, client_for):
    # The default start, a year before `end`, was the year 0: a 500.
    response = client_for(customer).get(
        "/api/v1/market-prices/series/?gpu_model=h200-sxm&end=0001-06-01"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["start"] == "0001-06-01"


def test_a_form_body_with_too_many_fields_is_a_json_400(provider, client_for):
    body = "&".join(f"observations={index}" for index in range(1200))
    response = client_for(provider).post(
        "/api/v1/market-prices/", body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "malformed_request"


# ------------------------------------------------------------------ HTML instead of JSON


def test_an_api_path_no_route_matches_answers_the_json_error_body(customer, client_for):
    response = client_for(customer).get("/api/v1/api-keys/0.5/")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "Not found.", "detail": {}}


def test_a_page_outside_the_api_keeps_djangos_404_page(client: Client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


# ------------------------------------------------------------------ answers the schema forbade


def test_every_operation_documents_the_standard_error_answers(openapi):
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert "400" in codes, (method, path)
            if operation.get("security"):
                assert {"401", "403", "429"} <= codes, (method, path)
            if method in {"post", "put", "patch", "delete"}:
                assert {"404", "409", "422"} <= codes, (method, path)
            for code, response in operation["responses"].items():
                if code.startswith("4"):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}, (method, path, code)
    assert openapi["components"]["schemas"]["Error"]["required"] == ["code", "message", "detail"]


def test_answers_particular_to_an_operation_are_documented(openapi):
    paths = openapi["paths"]
    assert "413" in paths["/api/v1/usage/events/"]["post"]["responses"]  # batch_too_large
    assert "409" in paths["/api/v1/invoices/preview/"]["get"]["responses"]  # no_open_period
    # Giving notice answers 201 (it records the exit); the schema said 200.
    assert set(paths["/api/v1/contracts/{id}/exit/"]["post"]["responses"]) >= {"201"}
    assert "200" not in paths["/api/v1/contracts/{id}/exit/"]["post"]["responses"]


def _enum_values(openapi: dict[str, Any], prop: dict[str, Any]) -> set[Any]:
    values: set[Any] = set()
    for option in prop.get("oneOf", [prop]):
        target = option
        if "$ref" in option:
            target = openapi["components"]["schemas"][option["$ref"].split("/")[-1]]
        values |= set(target.get("enum", []))
    return values


def test_a_running_contracts_blank_end_reason_and_exit_party_are_allowed(openapi):
    properties = openapi["components"]["schemas"]["Contract"]["properties"]
    assert "" in _enum_values(openapi, properties["end_reason"])
    assert "" in _enum_values(openapi, properties["exit_party"])
    # A token contract leases no hardware model: its slug is blank, which the pattern forbade.
    assert re.fullmatch(properties["leased_model_slug"]["pattern"], "")
    assert not re.fullmatch(properties["leased_model_slug"]["pattern"], "h200 sxm")


def test_fields_the_api_answers_with_null_are_nullable(openapi):
    schemas = openapi["components"]["schemas"]
    assert "null" in schemas["Lease"]["properties"]["billing_start"]["type"]
    assert "null" in schemas["GpuModel"]["properties"]["successor"]["type"]


def test_costs_and_identifiers_only_owners_see_are_optional(openapi):
    # Customers get sites, nodes and GPUs without these keys; the schema had them required.
    schemas = openapi["components"]["schemas"]
    assert "opex_currency" not in schemas["Site"].get("required", [])
    assert "acquired_on" not in schemas["Node"].get("required", [])
    assert "serial" not in schemas["Gpu"].get("required", [])
    assert "city" in schemas["Site"]["required"]
