"""Domain errors: every failure a user can cause has a stable code and an HTTP status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


class ApplicationError(Exception):
    """Base of every domain error; the API turns it into {code, message, detail}."""

    code: str = "application_error"
    status_code: int = 400
    default_message: str = "The request could not be processed."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        detail: dict[str, Any] | None = None,
        status_code: int | None = None,
    ) -> None:
        self.message = message or self.default_message
        if code is not None:
            self.code = code
        if status_code is not None:
            self.status_code = status_code
        self.detail: dict[str, Any] = detail or {}
        super().__init__(self.message)

    def as_dict(self) -> dict[str, Any]:
        """The error body every API answer uses."""
        return {"code": self.code, "message": self.message, "detail": self.detail}


class ValidationFailed(ApplicationError):
    """Input that does not have the required shape or range (400)."""

    code = "invalid"
    status_code = 400
    default_message = "The input is not valid."


class NotFound(ApplicationError):
    """The object does not exist or does not belong to the caller (404)."""

    code = "not_found"
    status_code = 404
    default_message = "Not found."


class Conflict(ApplicationError):
    """The request conflicts with the current state: capacity gone, wrong status (409)."""

    code = "conflict"
    status_code = 409
    default_message = "The request conflicts with the current state."


class SemanticError(ApplicationError):
    """Well-formed input that breaks a business rule (422)."""

    code = "unprocessable"
    status_code = 422
    default_message = "The request breaks a business rule."


class PayloadTooLarge(ApplicationError):
    """The request body (or an imported file) is larger than the endpoint takes (413)."""

    code = "payload_too_large"
    status_code = 413
    default_message = "The request body is too large."


class TooManyRequests(ApplicationError):
    """Throttled: the answer carries Retry-After (429)."""

    code = "throttled"
    status_code = 429
    default_message = "Too many requests; slow down."

    def __init__(
        self, message: str | None = None, *, retry_after_seconds: int, **kwargs: Any
    ) -> None:
        detail = {"retry_after_seconds": retry_after_seconds, **(kwargs.pop("detail", None) or {})}
        super().__init__(message, detail=detail, **kwargs)
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True)
class FieldError:
    """One broken input rule: which field, a stable code and a sentence."""

    field: str
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """The JSON shape used in error details and import reports."""
        return {"field": self.field, "code": self.code, "message": self.message}


def raise_if_any(errors: Iterable[FieldError]) -> None:
    """Raise a 400 carrying the first error's code and every error in the detail."""
    found = list(errors)
    if not found:
        return
    first = found[0]
    raise ValidationFailed(
        first.message,
        code=first.code,
        detail={"field": first.field, "errors": [error.as_dict() for error in found]},
    )


def require_reason(reason: str, message: str, *, field: str = "reason") -> None:
    """A 400 `reason_required` with `message` when the reason is blank: whoever changes money or
    limits says why."""
    if not reason.strip():
        raise ValidationFailed(message, code="reason_required", detail={"field": field})
