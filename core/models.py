"""Cross-cutting records: the stored answers behind the Idempotency-Key header, the outbox."""

from __future__ import annotations

import uuid

from django.db import models


class IdempotencyRecord(models.Model):
    """The first answer to a POST with an Idempotency-Key, replayed for the same key and body."""

    scope = models.CharField(max_length=64, help_text="Who owns the key, e.g. org:42.")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=512)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of method, path and body.")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "key"], name="idempotency_key_unique_per_scope"
            )
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.key}"


class OutboxEvent(models.Model):
    """An event for one organization, written in the transaction of the change it reports.

    `event_id` is the Standard Webhooks `webhook-id` of every delivery of it: a receiver that
    keeps the ids it has seen processes each event exactly once, however often it arrives.
    """

    event_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    organization_id = models.BigIntegerField(db_index=True)
    type = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    occurred_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When the dispatcher fanned it out to the endpoints."
    )

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["id"],
                condition=models.Q(dispatched_at__isnull=True),
                name="outbox_undispatched_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"

    @property
    def message_id(self) -> str:
        """The `webhook-id` header of every delivery of this event."""
        return f"evt_{self.event_id.hex}"
