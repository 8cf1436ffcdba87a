"""Webhook endpoints of organizations, the deliveries of outbox events to them and each attempt."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from accounts.models import Organization
from core.models import OutboxEvent


class WebhookEndpoint(models.Model):
    """A URL of an organization that receives the event types it subscribed to, signed."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.CharField(
        max_length=2000, help_text="https:// on a public address (webhooks.services.addresses)."
    )
    description = models.CharField(max_length=200, blank=True)
    event_types = ArrayField(
        models.CharField(max_length=64), help_text="Event types delivered here; never empty."
    )
    secret = models.CharField(max_length=100, help_text="whsec_… (Standard Webhooks).")
    enabled = models.BooleanField(default=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(event_types__len__gt=0), name="webhook_endpoint_has_event_types"
            ),
            models.CheckConstraint(
                condition=Q(url__startswith="https://") | Q(url__startswith="http://"),
                name="webhook_endpoint_url_http",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.url} ({self.organization})"


class DeliveryStatus(models.TextChoices):
    """Where a delivery is: waiting for an attempt, delivered, or given up."""

    PENDING = "pending", "Pending"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed (retries exhausted or endpoint disabled)"


class Delivery(models.Model):
    """One outbox event for one endpoint; every attempt carries the event's `webhook-id`."""

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.ForeignKey(OutboxEvent, on_delete=models.PROTECT, related_name="deliveries")
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempt_count = models.PositiveIntegerField(default=0)
    # Failed attempts since the last (re)start: picks the next delay of the retry schedule.
    retry_step = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # The dispatcher's current claim: only the task sent with it may attempt the delivery, so a
    # claim that expired (a killed worker) is taken over by exactly one new task.
    claim_id = models.UUIDField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event"], name="delivery_once_per_event"),
            models.CheckConstraint(
                condition=Q(status="pending") | Q(next_attempt_at__isnull=True),
                name="delivery_next_attempt_only_pending",
            ),
            models.CheckConstraint(
                condition=~Q(status="succeeded") | Q(delivered_at__isnull=False),
                name="delivery_succeeded_has_delivered_at",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event.type} → {self.endpoint.url} ({self.status})"


class DeliveryAttempt(models.Model):
    """One HTTP POST of a delivery: the answer (or the error) and how long it took."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempts")
    attempted_at = models.DateTimeField()
    succeeded = models.BooleanField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    response_excerpt = models.CharField(max_length=500, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"attempt {self.pk} of delivery {self.delivery_id}"
