"""Plain Django views outside the API: the health check and stored documents for staff."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import SuspiciousFileOperation
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404, HttpRequest, JsonResponse
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


@require_GET
@staff_member_required
def stored_document(request: HttpRequest, name: str) -> FileResponse:
    """A stored file (an invoice or credit-note PDF) under MEDIA_URL, for staff only.

    The admin links stored files by their storage URL; this answers it in every environment
    (`make run` has no web server for MEDIA_ROOT) without making customer documents public.
    """
    try:
        if not default_storage.exists(name):
            raise Http404("No such stored document.")
        handle = default_storage.open(name, "rb")
    except SuspiciousFileOperation as error:  # a path outside the storage
        raise Http404("No such stored document.") from error
    return FileResponse(handle, filename=PurePosixPath(name).name)
