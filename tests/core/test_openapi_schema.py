"""The OpenAPI schema that /api/docs/ renders generates and validates with no error."""

from __future__ import annotations

import pytest
from django.test import Client
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema


@pytest.mark.django_db
def test_the_schema_validates_and_lists_every_published_path(client: Client):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)  # raises on an invalid schema
    paths = set(schema["paths"])
    for path in [
        "/api/v1/organizations/me/",
        "/api/v1/api-keys/",
        "/api/v1/gpu-models/",
        "/api/v1/market-prices/",
        "/api/v1/sites/",
        "/api/v1/nodes/",
        "/api/v1/gpus/",
        "/api/v1/outages/",
        "/api/v1/nodes/import",
        "/api/v1/contracts/",
        "/api/v1/contracts/{contract_pk}/events/",
        "/api/v1/offers/",
        "/api/v1/sla-offerings/",
        "/api/v1/capacity/",
        "/api/v1/quotes/",
        "/api/v1/holds/",
        "/api/v1/leases/",
        "/api/v1/leases/{lease_pk}/acceptance-runs/",
        "/api/v1/acceptance-runs/",
        "/api/v1/acceptance-runs/{id}/confirm/",
        "/api/v1/acceptance-runs/{id}/dispute/",
        "/api/v1/acceptance-runs/{id}/decide/",
        "/api/v1/usage/events/",
        "/api/v1/usage/rollups/",
    ]:
        assert path in paths, sorted(paths)
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200
