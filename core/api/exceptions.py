"""One exception handler: every API error is {"code", "message", "detail"} with the right status."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import ApplicationError

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


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Turn domain and DRF errors into the project's error body; unknown errors stay 500s."""
    if isinstance(exc, ApplicationError):
        return Response(exc.as_dict(), status=exc.status_code)
    if isinstance(exc, DjangoValidationError):
        errors: Any = exc.message_dict if hasattr(exc, "error_dict") else {"errors": exc.messages}
        return Response(
            _error_body("invalid", "The input is not valid.", errors),
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
