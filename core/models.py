"""Cross-cutting records: the stored answers behind the Idempotency-Key header."""

from __future__ import annotations

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
