"""Input rules of webhook endpoints, written once: event-type lists and URL shape.

Pure functions returning `core.errors.FieldError`; the services raise them with `raise_if_any`.
Address rules (what a host resolves to) need DNS and live in `webhooks.services.addresses`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from core.errors import FieldError
from core.events import EVENT_TYPES

MAX_URL_LENGTH = 2000
# More entries than the catalogue has can only be duplicates or junk; the cap keeps a huge
# list from being read at all.
MAX_EVENT_TYPES = 64


def event_type_errors(value: Any) -> list[FieldError]:
    """A non-empty list of distinct known event types, no longer than MAX_EVENT_TYPES."""
    field = "event_types"
    if not isinstance(value, list):
        return [FieldError(field, "invalid_event_types", "event_types must be a list of strings.")]
    if not value:
        return [FieldError(field, "event_types_required", "Subscribe to at least one event type.")]
    if len(value) > MAX_EVENT_TYPES:
        return [
            FieldError(
                field,
                "too_many_event_types",
                f"At most {MAX_EVENT_TYPES} event types; {len(value)} were sent.",
            )
        ]
    if not all(isinstance(item, str) for item in value):
        return [FieldError(field, "invalid_event_types", "Each event type must be a string.")]
    errors: list[FieldError] = []
    unknown = sorted({item for item in value if item not in EVENT_TYPES})
    if unknown:
        shown = ", ".join(repr(item[:64]) for item in unknown[:5])
        errors.append(FieldError(field, "unknown_event_type", f"Unknown event type(s): {shown}."))
    if len(set(value)) != len(value):
        errors.append(FieldError(field, "duplicate_event_type", "An event type is repeated."))
    return errors


def url_shape_errors(url: Any, *, allow_http: bool) -> list[FieldError]:
    """An absolute https:// URL (http:// only where loopback is allowed) with a host, no
    credentials and no fragment."""
    field = "url"
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        return [FieldError(field, "invalid_url", f"A URL of at most {MAX_URL_LENGTH} characters.")]
    if any(ord(char) < 33 or ord(char) == 127 for char in url):
        return [FieldError(field, "invalid_url", "The URL holds spaces or control characters.")]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return [FieldError(field, "invalid_url", "The URL cannot be parsed.")]
    allowed = ("https", "http") if allow_http else ("https",)
    if parts.scheme.lower() not in allowed:
        return [
            FieldError(field, "url_scheme_not_allowed", "Webhook URLs must use https:// (TLS).")
        ]
    if not parts.hostname:
        return [FieldError(field, "invalid_url", "The URL has no host.")]
    if parts.username is not None or parts.password is not None:
        return [FieldError(field, "invalid_url", "Credentials in the URL are not accepted.")]
    if parts.fragment:
        return [FieldError(field, "invalid_url", "A webhook URL has no #fragment.")]
    if port == 0:
        return [FieldError(field, "invalid_url", "Port 0 is not a port.")]
    return []
