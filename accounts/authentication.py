"""DRF authentication by `Authorization: Api-Key <key>`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from accounts.errors import InvalidApiKey
from accounts.models import ApiKey, Organization
from accounts.services import api_key_authenticate
from accounts.throttling import FailedAuthThrottle

KEYWORD = "Api-Key"


class ApiKeyPrincipal:
    """The request.user of an API-key request: the organization acting through one of its keys."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, api_key: ApiKey) -> None:
        self.api_key = api_key
        self.organization: Organization = api_key.organization
        self.username = f"api-key:{api_key.prefix}"

    def __str__(self) -> str:
        return self.username

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        """API keys never carry Django model permissions."""
        return False


class ApiKeyAuthentication(BaseAuthentication):
    """Authenticate with an organization's API key; a bad key is a 401 with a code.

    Every failure (unknown, malformed, expired or revoked key) counts against the client's
    address; past FAILED_AUTH_THROTTLE_RATE the address gets 429 too_many_auth_failures.
    """

    def authenticate(self, request: Request) -> tuple[ApiKeyPrincipal, ApiKey] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() != KEYWORD.lower():
            return None
        # DRF authenticates again if request.user is read after a failure: answer alike, once.
        failed = getattr(request._request, "_cardhour_auth_failure", None)
        if failed is not None:
            raise failed
        throttle = FailedAuthThrottle()
        throttle.check(request)
        try:
            api_key = api_key_authenticate(raw_key=_raw_key(header))
        except InvalidApiKey as exc:
            throttle.record(request)
            request._request._cardhour_auth_failure = exc  # type: ignore[attr-defined]
            raise
        return ApiKeyPrincipal(api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        """Makes DRF answer 401 (not 403) when credentials are missing."""
        return KEYWORD


def _raw_key(header: list[bytes]) -> str:
    """The key of `Authorization: Api-Key <key>`, or InvalidApiKey."""
    if len(header) != 2:
        raise InvalidApiKey(
            "Send exactly one key: `Authorization: Api-Key <key>`.", code="malformed_api_key"
        )
    try:
        return header[1].decode()
    except UnicodeDecodeError as exc:
        raise InvalidApiKey(code="malformed_api_key") from exc


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """Describes `Authorization: Api-Key <key>` in the OpenAPI schema."""

    target_class = "accounts.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Api-Key <key>`: an organization's API key.",
        }
