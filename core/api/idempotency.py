"""The view-side plug of the Idempotency-Key piece: decorate a POST handler with @idempotent."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from core.idempotency import idempotent_call

HEADER = "Idempotency-Key"


def _json_safe(data: Any) -> Any:
    return json.loads(JSONRenderer().render(data)) if data is not None else None


def idempotent(view_method: Callable[..., Response]) -> Callable[..., Response]:
    """Make a DRF view method answer the same for a repeated Idempotency-Key and body."""

    @functools.wraps(view_method)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER)
        if key is None:
            return view_method(self, request, *args, **kwargs)

        def handler() -> tuple[int, Any]:
            try:
                response = view_method(self, request, *args, **kwargs)
            except Exception as exc:
                response = self.handle_exception(exc)
            return response.status_code, _json_safe(response.data)

        answer = idempotent_call(
            scope=self.idempotency_scope(request),
            key=key,
            method=request.method or "POST",
            path=request.path,
            body=request.data,
            handler=handler,
        )
        response = Response(answer.body, status=answer.status_code)
        if answer.replayed:
            response["Idempotent-Replayed"] = "true"
        return response

    return wrapper
