"""One exception handler: every API error is {"code", "message", "detail"} with the right status."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.dberrors import UNTRANSLATABLE_CHARACTER, sqlstate
from core.errors import ApplicationError, TooManyRequests

# Stable codes for DRF's own exceptions, by class.
_DRF_CODES: dict[type[exceptions.APIException], tuple[str, str]] = {
    exceptions.ParseError: ("malformed_request", "The request body could not be parsed."),
    exceptions.NotAuthenticated: (
        "not_authenticated",
        "Authentication credentials were not provided.",
    ),
    exceptions.AuthenticationFailed: ("authentication_failed", "The credentials are not valid."),
    exceptions.PermissionDenied: ("permission_denied", "You may not perform this action."),
    exceptions.NotFound: ("not_found", "Not found."),
    exceptions.MethodNotAllowed: ("method_not_allowed", "This method is not allowed here."),
    exceptions.NotAcceptable: ("not_acceptable", "The requested format is not available."),
    exceptions.UnsupportedMediaType: ("unsupported_media_type", "Send JSON."),
    exceptions.Throttled: ("throttled", "Too many requests; slow down."),
    exceptions.ValidationError: ("invalid", "The input is not valid."),
}


def _error_body(code: str, message: str, detail: Any) -> dict[str, Any]:
    if not isinstance(detail, dict):
        detail = {"errors": detail} if detail else {}
    return {"code": code, "message": message, "detail": detail}


def _drf_code(exc: exceptions.APIException) -> tuple[str, str]:
    for klass in type(exc).__mro__:
        if klass in _DRF_CODES:
            return _DRF_CODES[klass]
    return ("error", "The request could not be processed.")


def _is_nul_character_error(exc: DataError) -> bool:
    """PostgreSQL stores no U+0000 in text or jsonb, wherever in a request the string came from.

    A NUL in a query parameter, a body field, a JSON document or an imported CSV cell is bad
    input, whichever column it reaches: psycopg refuses it for text ("cannot contain NUL"), and
    PostgreSQL for jsonb (SQLSTATE 22P05). The use case's transaction has rolled back by then.
    """
    return "cannot contain NUL" in str(exc) or sqlstate(exc) == UNTRANSLATABLE_CHARACTER


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Turn domain and DRF errors into the project's error body; unknown errors stay 500s."""
    if isinstance(exc, ApplicationError):
        answer = Response(exc.as_dict(), status=exc.status_code)
        if isinstance(exc, TooManyRequests):
            answer["Retry-After"] = str(exc.retry_after_seconds)
        return answer
    if isinstance(exc, DjangoValidationError):
        errors: Any = exc.message_dict if hasattr(exc, "error_dict") else {"errors": exc.messages}
        return Response(
            _error_body("invalid", "The input is not valid.", errors),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, DataError) and _is_nul_character_error(exc):
        return Response(
            _error_body("invalid_characters", "Text may not contain NUL (U+0000) characters.", {}),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, RequestDataTooBig):
        # A form body past DATA_UPLOAD_MAX_MEMORY_SIZE; JSON bodies answer alike (core.api.parsers).
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            _error_body(
                "payload_too_large", f"The body exceeds {limit} bytes.", {"max_bytes": limit}
            ),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, SuspiciousOperation):
        # Django's request limits (DATA_UPLOAD_MAX_NUMBER_FIELDS and friends), met while DRF
        # parses the body; left alone they reach Django's HTML 400 page.
        return Response(
            _error_body("malformed_request", "The request is too large or not well-formed.", {}),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    code, message = _drf_code(exc)
    detail: Any = exc.detail
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
    elif isinstance(exc.detail, str):
        message, detail = str(exc.detail), {}
        wait = getattr(exc, "wait", None)
        if isinstance(exc, exceptions.Throttled) and wait is not None:
            detail = {"retry_after_seconds": int(wait)}
    response.data = _error_body(code, message, detail)
    return response


# Django's own error pages, for what never reaches a DRF view (a URL no route matches, a request
# Django rejects before routing, a crash): API paths answer the same JSON body as the views.
def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: JSON under /api/, Django's page elsewhere."""
    if _is_api(request):
        body = _error_body("malformed_request", "The request is not well-formed.", {})
        return JsonResponse(body, status=status.HTTP_400_BAD_REQUEST)
    return defaults.bad_request(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: JSON under /api/, Django's page elsewhere."""
    if _is_api(request):
        body = _error_body("not_found", "Not found.", {})
        return JsonResponse(body, status=status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: JSON under /api/, Django's page elsewhere."""
    if _is_api(request):
        body = _error_body("server_error", "Something went wrong on our side.", {})
        return JsonResponse(body, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return defaults.server_error(request)
