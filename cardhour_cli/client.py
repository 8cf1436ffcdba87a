"""A thin HTTP client of the Cardhour API: JSON in and out, errors as `ApiError`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from cardhour_cli import __version__
from cardhour_cli.config import Settings
from cardhour_cli.errors import ApiError

TIMEOUT = httpx.Timeout(60.0, connect=10.0)


class Client:
    """One connection pool to the API, authenticated with the settings' key."""

    def __init__(self, settings: Settings, *, transport: httpx.BaseTransport | None = None):
        headers = {"User-Agent": f"cardhour-cli/{__version__}", "Accept": "application/json"}
        if settings.api_key:
            headers["Authorization"] = f"Api-Key {settings.api_key}"
        self.settings = settings
        self._http = httpx.Client(
            base_url=settings.api_base, headers=headers, timeout=TIMEOUT, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request; an answer of 400 or more (or no answer) raises ApiError."""
        query = {name: value for name, value in (params or {}).items() if value is not None}
        extra = dict(headers or {})
        if content is not None:
            extra.setdefault("Content-Type", "application/json")
        try:
            response = self._http.request(
                method, path, params=query, json=json, content=content, headers=extra
            )
        except httpx.HTTPError as error:
            raise ApiError(
                status=0,
                code="unreachable",
                message=f"Cannot reach {self.settings.url}: {error}. Is the server running "
                "(make run), and is CARDHOUR_URL right?",
            ) from error
        if response.status_code >= 400:
            raise _error_of(response)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params).json()

    def post(self, path: str, body: Any, *, idempotency_key: str | None = None) -> Any:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self.request("POST", path, json=body, headers=headers).json()

    def pages(self, path: str, *, limit: int | None, **params: Any) -> Iterator[dict[str, Any]]:
        """The rows of a cursor-paginated list, following `next` until `limit` rows."""
        answer = self.get(path, **params)
        seen = 0
        while True:
            for row in answer["results"]:
                if limit is not None and seen >= limit:
                    return
                seen += 1
                yield row
            following = answer.get("next")
            if not following:
                return
            answer = self._follow(following)

    def _follow(self, url: str) -> Any:
        try:
            response = self._http.get(url)
        except httpx.HTTPError as error:
            raise ApiError(status=0, code="unreachable", message=str(error)) from error
        if response.status_code >= 400:
            raise _error_of(response)
        return response.json()


def _error_of(response: httpx.Response) -> ApiError:
    """The API's error body, or a stand-in when the answer is not one (a proxy's page)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        detail = body.get("detail")
        return ApiError(
            status=response.status_code,
            code=body["code"],
            message=str(body.get("message") or ""),
            detail=detail if isinstance(detail, dict) else {},
        )
    return ApiError(
        status=response.status_code,
        code="server_error" if response.status_code >= 500 else "http_error",
        message=f"HTTP {response.status_code} from {response.request.url}",
    )
