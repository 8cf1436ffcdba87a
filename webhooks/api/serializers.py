"""Serializers of the webhooks API: endpoints (the secret only in the answer to a create),
their deliveries with each attempt, and the envelope every webhook carries."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.serializers import StrictInputSerializer
from core.event_types import EVENT_TYPES
from webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint

EVENT_TYPE_CHOICES = sorted(EVENT_TYPES)


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "string", "enum": EVENT_TYPE_CHOICES},
        "minItems": 1,
        "uniqueItems": True,
    }
)
class EventTypesField(serializers.Field):
    """A list of event types, passed on as sent: webhooks.rules answers each bad list with its
    own code (event_types_required, too_many_event_types, unknown_event_type, …)."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return list(value)


class WebhookEndpointSerializer(serializers.ModelSerializer[WebhookEndpoint]):
    """An endpoint without its secret."""

    event_types = EventTypesField()

    class Meta:
        model = WebhookEndpoint
        fields = [
            "id",
            "url",
            "description",
            "event_types",
            "enabled",
            "consecutive_failures",
            "disabled_at",
            "disabled_reason",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class WebhookEndpointCreatedSerializer(WebhookEndpointSerializer):
    """An endpoint just created, with its signing secret (shown this once)."""

    secret = serializers.CharField(
        read_only=True, help_text="whsec_…: verify the webhook-signature header with it."
    )

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookEndpointCreateSerializer(StrictInputSerializer):
    """A new endpoint: an https URL and the event types it receives."""

    url = serializers.CharField(help_text="https:// URL on a public address.")
    event_types = EventTypesField(allow_null=True)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)


class WebhookEndpointUpdateSerializer(StrictInputSerializer):
    """Changes to an endpoint; enabled=true after a disabling clears its failure count."""

    url = serializers.CharField(required=False)
    event_types = EventTypesField(required=False)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False)


class RedeliverSerializer(StrictInputSerializer):
    """Which delivery of the endpoint to send again."""

    delivery = serializers.IntegerField(min_value=1, max_value=2**63 - 1)


class DeliveryAttemptSerializer(serializers.ModelSerializer[DeliveryAttempt]):
    """One POST: the receiver's status code or the error, and how long it took."""

    class Meta:
        model = DeliveryAttempt
        fields = [
            "id",
            "attempted_at",
            "succeeded",
            "status_code",
            "error",
            "response_excerpt",
            "duration_ms",
        ]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer[Delivery]):
    """An event's delivery to the endpoint, with every attempt (newest first)."""

    event_id = serializers.CharField(source="event.message_id", read_only=True)
    event_type = serializers.CharField(source="event.type", read_only=True)
    occurred_at = serializers.DateTimeField(source="event.occurred_at", read_only=True)
    attempts = DeliveryAttemptSerializer(many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event_id",
            "event_type",
            "occurred_at",
            "status",
            "attempt_count",
            "next_attempt_at",
            "last_attempt_at",
            "delivered_at",
            "created_at",
            "attempts",
        ]
        read_only_fields = fields


class WebhookMessageSerializer(serializers.Serializer[Any]):
    """The body of every webhook (signed per Standard Webhooks: webhook-id, webhook-timestamp,
    webhook-signature headers; webhook-id is `id`, the same on every retry)."""

    id = serializers.CharField(help_text="evt_…: the event's id; deduplicate on it.")
    type = serializers.ChoiceField(choices=EVENT_TYPE_CHOICES)
    timestamp = serializers.DateTimeField(help_text="When the change happened.")
    data = serializers.DictField(  # type: ignore[assignment]
        help_text="The event's fields (docs/webhooks.md)."
    )
