"""The request id of every request, its log context, one log line per request, and the
read-your-writes pin of requests that wrote."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase
from rest_framework.permissions import SAFE_METHODS

from core.db_routing import current_principal, replica_alias, writes_pin
from core.logging import organization_var, request_context

HEADER = "X-Request-ID"
# An incoming id is kept when it is short and plain (a proxy's or a client's trace id).
_WELL_FORMED = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
# Probes hit these every few seconds: their successful answers are logged at DEBUG only.
QUIET_PATHS = frozenset({"/healthz", "/metrics"})

logger = logging.getLogger("cardhour.request")


def request_id_for(incoming: str | None) -> str:
    """The caller's X-Request-ID when it is well formed, else a new uuid4."""
    if incoming and _WELL_FORMED.match(incoming):
        return incoming
    return str(uuid.uuid4())


class RequestContextMiddleware:
    """Binds a request id (and, once known, the organization) to every log record of a request.

    Answers the id in `X-Request-ID` and ends each request with one line: method, path (never the
    query string), status and duration_ms.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        request_id = request_id_for(request.headers.get(HEADER))
        request.request_id = request_id  # type: ignore[attr-defined]
        started = time.perf_counter()
        with request_context(request_id):
            response = self.get_response(request)
            # For what Django logs about this request after the middleware (core.logging).
            request.log_organization = organization_var.get()  # type: ignore[attr-defined]
            duration_ms = round((time.perf_counter() - started) * 1000, 1)
            response[HEADER] = request_id
            status = response.status_code
            if status >= 500:
                level = logging.ERROR
            elif request.path in QUIET_PATHS and status < 400:
                level = logging.DEBUG
            else:
                level = logging.INFO
            logger.log(
                level,
                "%s %s %s %.1fms",
                request.method,
                request.path,
                status,
                duration_ms,
                extra={
                    "method": request.method,
                    "path": request.path,
                    "status": status,
                    "duration_ms": duration_ms,
                },
            )
        return response


class ReadYourWritesMiddleware:
    """After a POST, PUT, PATCH or DELETE, its organization reads from the primary for a while.

    Lists and reports may read from the streaming replica (core.db_routing), which lags the
    primary; a caller that just wrote reads its writes from the primary for
    DATABASE_REPLICA_PIN_SECONDS, from every web process (the pin is in the shared cache).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        # Without a replica there is nothing to pin: no cache write on the write paths.
        if request.method not in SAFE_METHODS and replica_alias() is not None:
            principal = current_principal()
            if principal is not None:
                writes_pin(principal=principal)
        return response
