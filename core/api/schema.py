"""The error answers every operation can give, documented once for the whole OpenAPI schema.

Every view answers errors through core.api.exceptions as {"code", "message", "detail"}; rather
than repeat them on ~90 operations, a drf-spectacular postprocessing hook adds the standard error
responses to each operation (README, "API conventions"):

- 400 everywhere (a body, query parameter or header that is not valid; on a read, also a query
  parameter the operation does not list: `unknown_query_parameter`);
- 401, 403 and 429 on operations behind an API key or session (the throttle is per key);
- 404 where the request can name something that is not there (or not the caller's): a path
  parameter, a query parameter (an object id, a cursor, a ?format= no renderer has) or a body;
- 409 and 422 on writes (state conflicts, business rules, an Idempotency-Key reused with
  another body).

A response a view declares itself keeps its description; one declared without a body (e.g.
`409: OpenApiResponse()`) gets the error body.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.contrib.pydantic import PydanticExtension

ERROR_COMPONENT = "Error"
ERROR_REF = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}

ERROR_DESCRIPTIONS = {
    "400": (
        "The input is not valid (`invalid`, `malformed_request`, ...); a body field the "
        "operation does not take is `unknown_field`, named in `detail.field`."
    ),
    "401": "No credentials, or credentials that are not valid.",
    "403": "Authenticated, but not allowed (read-only key, wrong kind of organization).",
    "404": "Not found, or not the caller's.",
    "409": "Conflicts with the current state (capacity gone, wrong status).",
    "422": "Breaks a business rule, or reuses an Idempotency-Key with another body.",
    "429": "Too many requests; `detail.retry_after_seconds` says when to retry.",
}

# Reads also refuse a query parameter they do not list (core.api.params.StrictQueryParamsMixin).
READ_400_DESCRIPTION = (
    "The input is not valid (`invalid`, `malformed_request`, ...); a query parameter the "
    "operation does not list is `unknown_query_parameter`, named in `detail.unknown`."
)

_WRITE_METHODS = {"post", "put", "patch", "delete"}


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The body of every error answer.",
    "properties": {
        "code": {"type": "string", "description": "Stable, machine-readable error code."},
        "message": {"type": "string", "description": "What went wrong, for a human."},
        "detail": {
            "type": "object",
            "additionalProperties": {},
            "description": "Field errors or other particulars; may be empty.",
        },
    },
    "required": ["code", "message", "detail"],
}


def _error_codes(method: str, operation: dict[str, Any]) -> list[str]:
    parameters = operation.get("parameters", [])
    secured = any(requirement for requirement in operation.get("security", []))
    codes = ["400"]
    if secured:
        codes += ["401", "403"]
    if method in _WRITE_METHODS or any(
        parameter["in"] in {"path", "query"} for parameter in parameters
    ):
        codes.append("404")
    if method in _WRITE_METHODS:
        codes += ["409", "422"]
    if secured:
        codes.append("429")
    return codes


def add_error_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: document the standard error answers everywhere."""
    result.setdefault("components", {}).setdefault("schemas", {})[ERROR_COMPONENT] = ERROR_SCHEMA
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in {"get", *_WRITE_METHODS}:
                continue
            responses = operation.setdefault("responses", {})
            for code in _error_codes(method, operation):
                description = ERROR_DESCRIPTIONS[code]
                if method == "get" and code == "400":
                    description = READ_400_DESCRIPTION
                responses.setdefault(code, {"description": description})
            for code, response in responses.items():
                if code.startswith("4") and not response.get("content"):
                    response["content"] = {"application/json": {"schema": ERROR_REF}}
                    if not response.get("description") or response["description"] == (
                        "No response body"
                    ):
                        response["description"] = ERROR_DESCRIPTIONS.get(code, "")
    return result


class UntitledPydanticExtension(PydanticExtension):
    """Pydantic input models as components named by drf-spectacular alone.

    pydantic puts the model's name in `title`; the same model documented as a create and a
    partial-update body becomes two components (`SiteInputRequest`, `PatchedSiteInputRequest`)
    with one title, and client generators that name classes by title (openapi-python-client)
    then refuse the second one and drop its operation.
    """

    priority = 1

    def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
        schema = super().map_serializer(auto_schema, direction)
        if isinstance(schema, dict):
            schema.pop("title", None)
        return schema
