"""Rate limits that hold across processes, and the client address they are keyed on.

DRF's SimpleRateThrottle keeps a list of timestamps per key that it reads, appends to and
writes back: two workers reading the same list both let their request through, so on two
processes a limit of 2,400 let 2,600 pass. `SharedRateThrottle` counts with the cache's atomic
`add` and `incr` instead (Redis SET NX / INCR in production, where CACHE_URL must name a shared
cache), in fixed windows that open with the first request of a key.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.cache import cache as default_cache
from django.core.cache.backends.base import BaseCache
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle


def client_address(request: HttpRequest | Request) -> str | None:
    """The caller's address: REMOTE_ADDR, or the X-Forwarded-For entry our own proxies added.

    DRF's rule with NUM_PROXIES (settings TRUSTED_PROXY_COUNT): 0 ignores X-Forwarded-For,
    which a client can set to anything; N takes the N-th address from its right. The API
    throttles and the admin's login lockout (django-axes) both key on this. None when the
    request has no address (a test client's forced login).
    """
    # DRF's rule reads only META and headers, which Django's own request has too.
    address = BaseThrottle().get_ident(request)  # type: ignore[arg-type]
    return str(address) if address else None


def window_hit(*, key: str, period: int, cache: BaseCache = default_cache) -> tuple[int, int]:
    """Count one event under `key`: the events in its window so far, and seconds left in it."""
    now = time.time()
    if cache.add(key, 1, period):  # the first event opens a window of `period` seconds
        cache.set(f"{key}:opened", now, period)
        return 1, period
    try:
        count = int(cache.incr(key))
    except ValueError:  # the window closed between add and incr: this event opens the next
        return window_hit(key=key, period=period, cache=cache)
    return count, _seconds_left(cache, key, period, now)


def window_peek(*, key: str, period: int, cache: BaseCache = default_cache) -> tuple[int, int]:
    """The events counted under `key` in its open window, and seconds left in it."""
    now = time.time()
    count = int(cache.get(key, 0))
    return count, _seconds_left(cache, key, period, now) if count else 0


def _seconds_left(cache: BaseCache, key: str, period: int, now: float) -> int:
    opened = cache.get(f"{key}:opened", now)
    return max(int(opened + period - now + 0.999), 1)


class SharedRateThrottle(SimpleRateThrottle):
    """DRF's rate throttle (scopes, rates, cache keys), counted atomically in the cache."""

    # Set by SimpleRateThrottle.__init__ from the rate (not declared in DRF's stubs).
    num_requests: int | None
    duration: int | None

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None or self.num_requests is None or self.duration is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        count, self._seconds_left = window_hit(key=self.key, period=self.duration, cache=self.cache)
        return count <= self.num_requests

    def wait(self) -> float | None:
        """Seconds until the window that refused this request closes (Retry-After)."""
        return float(getattr(self, "_seconds_left", 0)) or None
