"""Throttling per API key (session users per user, anonymous per address)."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import ApiKey


class ApiKeyRateThrottle(SimpleRateThrottle):
    """Rate limit in the `api_key` scope, keyed by the API key (or user, or client address)."""

    scope = "api_key"

    def get_cache_key(self, request: Request, view: Any) -> str:
        if isinstance(request.auth, ApiKey):
            ident = f"key:{request.auth.prefix}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"addr:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
