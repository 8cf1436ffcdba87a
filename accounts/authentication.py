"""DRF authentication by `Authorization: Api-Key <key>`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from accounts.errors import InvalidApiKey
from accounts.models import ApiKey, Organization
from accounts.services import api_key_authenticate

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
    """Authenticate with an organization's API key; a bad key is a 401 with a code."""

    def authenticate(self, request: Request) -> tuple[ApiKeyPrincipal, ApiKey] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() != KEYWORD.lower():
            return None
        if len(header) != 2:
            raise InvalidApiKey(
                "Send exactly one key: `Authorization: Api-Key <key>`.",
                code="malformed_api_key",
            )
        try:
            raw_key = header[1].decode()
        except UnicodeDecodeError as exc:
            raise InvalidApiKey(code="malformed_api_key") from exc
        api_key = api_key_authenticate(raw_key=raw_key)
        return ApiKeyPrincipal(api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        """Makes DRF answer 401 (not 403) when credentials are missing."""
        return KEYWORD


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
