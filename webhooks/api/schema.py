"""The OpenAPI document's `webhooks` section: one entry per event type of core.event_types.

SPECTACULAR_SETTINGS["WEBHOOKS"] names `webhooks.api.schema.<type with _>` for each type; the
attributes are made here from the catalogue, so a new type is documented by adding it there.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, OpenApiWebhook, extend_schema

from core.event_types import EVENT_TYPES, schema_name
from webhooks.api.serializers import WebhookMessageSerializer

SIGNING = (
    " Signed per Standard Webhooks: headers webhook-id (the event's id, the same on every "
    "retry), webhook-timestamp and webhook-signature (v1, HMAC-SHA256 with the endpoint's "
    "secret). Answer 2xx within 10 seconds; anything else is retried with backoff for about a "
    "day. Deliveries are at least once and unordered: deduplicate on webhook-id."
)


def _webhook(event_type: str) -> OpenApiWebhook:
    receivers, what = EVENT_TYPES[event_type]
    return OpenApiWebhook(
        name=event_type,
        decorator=extend_schema(
            summary=what,
            description=f"`{event_type}`, sent to endpoints of the {receivers}.{SIGNING}",
            request=WebhookMessageSerializer,
            responses={200: OpenApiResponse(description="Received (any 2xx).")},
        ),
    )


WEBHOOKS: dict[str, OpenApiWebhook] = {
    schema_name(event_type): _webhook(event_type) for event_type in EVENT_TYPES
}
globals().update(WEBHOOKS)
