"""Plain Django views outside the API: the health check."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from core.health import check_broker, check_database


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer, 503 with the failing part otherwise."""
    failures = {"database": check_database(), "broker": check_broker()}
    checks = {name: ("ok" if error is None else "down") for name, error in failures.items()}
    errors = {name: error for name, error in failures.items() if error is not None}
    healthy = not errors
    body = {"status": "ok" if healthy else "degraded", "checks": checks}
    if errors:
        body["errors"] = errors
    return JsonResponse(body, status=200 if healthy else 503)
