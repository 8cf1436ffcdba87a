"""The API's one JSON parser: a bounded body, bounded nesting, and a 400 with a code otherwise.

DRF's own JSONParser lets the RecursionError of a deeply nested document escape as a 500, and
reads its body through `request.body`, whose size cap (DATA_UPLOAD_MAX_MEMORY_SIZE) is one
number for the whole site. Every view parses JSON through `JSONParser` below (settings
`DEFAULT_PARSER_CLASSES`); a view that takes larger bodies (usage batches) subclasses it with
its own `max_body_bytes`, and the node import streams its rows with the same depth rule.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.json import strict_constant

from core.errors import FieldError, PayloadTooLarge, raise_if_any

_CONTAINERS = frozenset((dict, list))


def declared_length(request: Any) -> int:
    """The Content-Length the client declared (0 when absent or not a number)."""
    meta = getattr(request, "META", {}) if request is not None else {}
    try:
        return max(int(meta.get("CONTENT_LENGTH") or 0), 0)
    except (TypeError, ValueError):
        return 0


def body_size_check(*, request: Any, max_bytes: int) -> None:
    """Refuse a body by its declared length, before a byte of it is read."""
    if declared_length(request) > max_bytes:
        raise PayloadTooLarge(
            f"The body exceeds {max_bytes} bytes.", detail={"max_bytes": max_bytes}
        )


def body_read(stream: Any, *, request: Any, max_bytes: int) -> bytes:
    """The body's bytes, at most `max_bytes`: refused by Content-Length, and again by count."""
    body_size_check(request=request, max_bytes=max_bytes)
    raw = stream.read(max_bytes + 1) if stream is not None else b""
    if len(raw) > max_bytes:
        raise PayloadTooLarge(
            f"The body exceeds {max_bytes} bytes.", detail={"max_bytes": max_bytes}
        )
    return bytes(raw)


def json_depth_exceeds(value: Any, max_depth: int) -> bool:
    """True when arrays and objects nest deeper than `max_depth` (a scalar is depth 0).

    Walks level by level without recursion; a container whose children are all scalars (the
    common case: a list of flat objects) is passed over in C by `isdisjoint(map(type, ...))`.
    """
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return True
        deeper: list[Any] = []
        for node in level:
            children = node.values() if type(node) is dict else node
            if not _CONTAINERS.isdisjoint(map(type, children)):
                deeper += [child for child in children if type(child) in _CONTAINERS]
        level = deeper
    return False


def json_depth_error(max_depth: int) -> ParseError:
    """The one answer to a document nested too deeply, wherever it is parsed."""
    return ParseError(f"The JSON nests deeper than {max_depth} levels.")


def json_load(raw: bytes, *, encoding: str = "utf-8", max_depth: int | None = None) -> Any:
    """Decode a JSON document (no NaN or Infinity) nested at most `max_depth` levels.

    Any failure is DRF's ParseError, which the API answers as 400 `malformed_request`.
    """
    max_depth = settings.JSON_MAX_DEPTH if max_depth is None else max_depth
    try:
        data = json.loads(raw.decode(encoding), parse_constant=strict_constant)
    except RecursionError as exc:  # deeper than the interpreter's own stack allows
        raise json_depth_error(max_depth) from exc
    except (ValueError, LookupError) as exc:  # bad JSON, bad bytes, unknown charset
        raise ParseError(f"The body is not valid JSON: {exc}") from exc
    if json_depth_exceeds(data, max_depth):
        raise json_depth_error(max_depth)
    return data


class JSONParser(BaseParser):
    """JSON bodies with a size cap and a nesting limit (settings.JSON_MAX_DEPTH); no NaN.

    `max_body_bytes` None means Django's DATA_UPLOAD_MAX_MEMORY_SIZE. Not a subclass of DRF's
    JSONParser on purpose: DRF reads those through `request.body`, which applies Django's
    site-wide cap before this one could apply its own.
    """

    media_type = "application/json"
    renderer_class = JSONRenderer
    max_body_bytes: int | None = None

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        parser_context = parser_context or {}
        max_bytes = self.max_body_bytes or settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = body_read(stream, request=parser_context.get("request"), max_bytes=max_bytes)
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        return json_load(raw, encoding=encoding)


def request_object(request: Any) -> dict[str, Any]:
    """The JSON object of a request body (a copy), or a 400 `invalid` naming `__root__`."""
    if not isinstance(request.data, dict):
        raise_if_any([FieldError("__root__", "invalid", "Send a JSON object.")])
    return dict(request.data)
