"""drf-spectacular's settings: how /api/schema/ describes the API (the settings module reads
them as SPECTACULAR_SETTINGS)."""

from __future__ import annotations

from typing import Any

from core.event_types import EVENT_TYPES, schema_name

OPENAPI_SETTINGS: dict[str, Any] = {
    "TITLE": "Cardhour API",
    "DESCRIPTION": "GPU compute leasing: inventory, capacity, leases, contracts, usage, invoices.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Choice sets that share a field name get stable names (not hashes such as Status342Enum),
    # so a generated client keeps its class names from one release to the next.
    "ENUM_NAME_OVERRIDES": {
        "AcceptanceRunStatusEnum": "contracts.choices.AcceptanceRunStatus",
        "OfferStatusEnum": "leasing.choices.OfferStatus",
        "ContractEventKindEnum": "contracts.choices.EventKind",
        "PartyEnum": "contracts.choices.Party",
    },
    # pydantic input schemas use JSON Schema nulls, which OpenAPI 3.1 allows.
    "OAS_VERSION": "3.1.0",
    # `check --deploy` is about deployment settings; the schema is checked by its own test.
    "ENABLE_DJANGO_DEPLOY_CHECK": False,
    # The standard error answers ({"code", "message", "detail"}) on every operation.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.schema.add_error_responses",
    ],
    # The webhook event catalogue (core.event_types), one OpenApiWebhook per type.
    "WEBHOOKS": [f"webhooks.api.schema.{schema_name(event_type)}" for event_type in EVENT_TYPES],
}
