"""Admin pages of the webhooks app: endpoints, deliveries with their attempts (and manual
redelivery), and the outbox. Changes go through the services, never through the forms."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from core.errors import ApplicationError
from core.models import OutboxEvent
from webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint
from webhooks.services.deliveries import delivery_redeliver
from webhooks.services.endpoints import EndpointChanges, webhook_endpoint_update


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    """Rows written by services and jobs: shown, never edited here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    """Organizations' endpoints (without their secrets); enable or disable them here."""

    list_display = [
        "id",
        "organization",
        "url",
        "enabled",
        "consecutive_failures",
        "disabled_at",
        "created_at",
    ]
    list_filter = ["enabled"]
    search_fields = ["url", "organization__name", "organization__slug"]
    exclude = ["secret"]
    actions = ["enable", "disable"]

    def _set(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint], on: bool) -> None:
        for endpoint in queryset.order_by("pk"):
            webhook_endpoint_update(endpoint=endpoint, changes=EndpointChanges(enabled=on))
        self.message_user(request, f"{queryset.count()} endpoint(s) updated.", messages.SUCCESS)

    @admin.action(description="Enable (clears the failure count; waiting deliveries resume)")
    def enable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        self._set(request, queryset, True)

    @admin.action(description="Disable")
    def disable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        self._set(request, queryset, False)


class DeliveryAttemptInline(admin.TabularInline[DeliveryAttempt, Delivery]):
    """Every POST of a delivery, newest first."""

    model = DeliveryAttempt
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "attempted_at",
        "succeeded",
        "status_code",
        "error",
        "response_excerpt",
        "duration_ms",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    """Deliveries of outbox events to endpoints, with each attempt; redeliver by hand."""

    list_display = [
        "id",
        "event_type",
        "endpoint",
        "status",
        "attempt_count",
        "next_attempt_at",
        "delivered_at",
        "created_at",
    ]
    list_filter = ["status", "event__type"]
    search_fields = ["endpoint__url", "endpoint__organization__name"]
    list_select_related = ["event", "endpoint__organization"]
    inlines = [DeliveryAttemptInline]
    actions = ["redeliver"]

    @admin.display(description="event")
    def event_type(self, delivery: Delivery) -> str:
        return f"{delivery.event.type} ({delivery.event.message_id})"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The change page shows the attempts; nothing on it can be saved (all read-only).
        return bool(request.user.is_staff)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [field.name for field in Delivery._meta.fields]

    @admin.action(description="Redeliver now (same webhook-id, fresh retry schedule)")
    def redeliver(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        done = 0
        for delivery in queryset.order_by("pk"):
            try:
                delivery_redeliver(delivery=delivery)
                done += 1
            except ApplicationError as error:
                self.message_user(request, f"{delivery}: {error.message}", messages.ERROR)
        if done:
            self.message_user(request, f"{done} delivery(ies) queued again.", messages.SUCCESS)


@admin.register(OutboxEvent)
class OutboxEventAdmin(ReadOnlyAdmin):
    """Every event written with the change it reports, and when it was fanned out."""

    list_display = ["id", "type", "organization_id", "occurred_at", "dispatched_at"]
    list_filter = ["type"]
    search_fields = ["=event_id", "=organization_id"]
    readonly_fields = [
        "event_id",
        "organization_id",
        "type",
        "payload",
        "occurred_at",
        "created_at",
        "dispatched_at",
    ]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_staff)
