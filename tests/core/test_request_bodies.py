"""Request bodies: one JSON parser for the whole API, bounded in nesting and in size."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.urls import reverse

from accounts.models import Organization
from tests.factories import OrganizationFactory
from tests.isolation_fixtures import api_routes

pytestmark = pytest.mark.django_db

DEEP_ARRAY = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a": ' * 1000 + "1" + "}" * 1000
# The endpoints the attack reached with DRF's default parser (500 RecursionError), and usage.
CREATE_ENDPOINTS = [
    "/api/v1/quotes/",
    "/api/v1/leases/",
    "/api/v1/holds/",
    "/api/v1/sites/",
    "/api/v1/market-prices/",
    "/api/v1/api-keys/",
    "/api/v1/nodes/import",
    "/api/v1/usage/events/",
]
WRITES = [
    pytest.param(route, method, id=f"{route.name}-{method}")
    for route in api_routes()
    for method in route.methods
    if method in {"post", "put", "patch"} and route.name != "stripe-webhook"
]


@pytest.fixture
def both(db: None) -> Organization:
    """An organization that is provider and customer, so that no kind check answers first."""
    return OrganizationFactory(slug="both-ways", is_provider=True, is_customer=True)


def nested(depth: int) -> str:
    """An object whose field holds arrays nested so that the document is `depth` deep."""
    return '{"gpu_model": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("body", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
@pytest.mark.parametrize("url", CREATE_ENDPOINTS)
def test_a_body_nested_a_thousand_levels_is_a_400_malformed_request(client_for, both, url, body):
    response = client_for(both).generic("POST", url, body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    if url == "/api/v1/nodes/import" and body == DEEP_OBJECT:
        # The streaming import refuses an object whose first key is not "rows" right there.
        assert response.json()["code"] == "malformed_import"
        return
    assert response.json()["code"] == "malformed_request"
    assert "nests deeper than" in response.json()["message"]


@pytest.mark.parametrize(("route", "method"), WRITES)
def test_no_route_answers_a_deep_body_with_a_500(client_for, both, route, method):
    url = reverse(route.name, kwargs=dict.fromkeys(route.kwargs, 1))
    response = client_for(both).generic(
        method.upper(), url, DEEP_OBJECT, content_type="application/json"
    )
    assert response.status_code < 500, response.content[:300]
    if response.status_code == 400:
        assert response.json()["code"] in {"malformed_request", "malformed_import"}


def test_the_nesting_limit_is_the_setting(client_for, both):
    client = client_for(both)
    limit = settings.JSON_MAX_DEPTH
    at_limit = client.generic(
        "POST", "/api/v1/quotes/", nested(limit), content_type="application/json"
    )
    assert at_limit.status_code == 400 and at_limit.json()["code"] != "malformed_request"
    over = client.generic(
        "POST", "/api/v1/quotes/", nested(limit + 1), content_type="application/json"
    )
    assert over.status_code == 400 and over.json()["code"] == "malformed_request"


def test_usage_and_every_other_endpoint_answer_a_deep_body_alike(client_for, both):
    client = client_for(both)
    answers = [
        client.generic("POST", url, DEEP_ARRAY, content_type="application/json").json()
        for url in ("/api/v1/quotes/", "/api/v1/usage/events/")
    ]
    assert answers[0] == answers[1]


def test_a_json_body_past_the_size_limit_is_a_413_before_it_is_parsed(client_for, both, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({"gpu_model": "h200-sxm", "padding": "x" * 20_000})
    response = client_for(both).generic(
        "POST", "/api/v1/quotes/", body, content_type="application/json"
    )
    assert response.status_code == 413, response.json()
    assert response.json() == {
        "code": "payload_too_large",
        "message": "The body exceeds 10000 bytes.",
        "detail": {"max_bytes": 10_000},
    }


def test_a_body_in_a_declared_charset_is_decoded_with_it(client_for, both):
    body: Any = json.dumps({"name": "clé"}, ensure_ascii=False).encode("latin-1")
    response = client_for(both).generic(
        "POST", "/api/v1/api-keys/", body, content_type="application/json; charset=latin-1"
    )
    assert response.status_code == 201, response.content
    assert response.json()["name"] == "clé"
