"""Throttling per API key (session users per user, anonymous per address), and of failed
authentication per client address; both counted in the shared cache (core.api.throttling)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.request import Request

from accounts.models import ApiKey
from core.api.throttling import SharedRateThrottle, client_address, window_hit, window_peek
from core.errors import TooManyRequests


class ApiKeyRateThrottle(SharedRateThrottle):
    """Rate limit in the `api_key` scope, keyed by the API key (or user, or client address)."""

    scope = "api_key"

    def get_cache_key(self, request: Request, view: Any) -> str:
        if isinstance(request.auth, ApiKey):
            ident = f"key:{request.auth.prefix}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"addr:{client_address(request) or 'unknown'}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class FailedAuthThrottle(SharedRateThrottle):
    """Failed API-key authentications per client address (FAILED_AUTH_THROTTLE_RATE).

    Past the limit, every API-key request from that address answers 429 until the window
    closes, a valid key included: otherwise a guesser would learn a good key by the answer.
    """

    scope = "failed_auth"

    def get_rate(self) -> str | None:
        rate: str | None = settings.FAILED_AUTH_THROTTLE_RATE
        return rate

    def get_cache_key(self, request: Any, view: Any = None) -> str:
        ident = client_address(request) or "unknown"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def check(self, request: Request) -> None:
        """Refuse the request (429 too_many_auth_failures) if its address failed too often."""
        if self.num_requests is None or self.duration is None:
            return
        failures, seconds_left = window_peek(
            key=self.get_cache_key(request), period=self.duration, cache=self.cache
        )
        if failures >= self.num_requests:
            raise TooManyRequests(
                f"Too many failed authentications from your address; retry after {seconds_left} s.",
                code="too_many_auth_failures",
                retry_after_seconds=seconds_left,
            )

    def record(self, request: Request) -> None:
        """Count one failed authentication of the request's address."""
        if self.num_requests is None or self.duration is None:
            return
        window_hit(key=self.get_cache_key(request), period=self.duration, cache=self.cache)
