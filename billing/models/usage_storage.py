"""How usage events are stored over time: the once-only key of every event, and archived months.

The events table is partitioned by month of occurred_at. PostgreSQL only enforces a unique
constraint on a partitioned table when it includes the partition key, and (source, event_id)
does not: a replay of an event with another timestamp would land in another month. So the key
lives here, unpartitioned and narrow, and outlives the archived months of its events: a replay
of an event whose month was archived is still a duplicate.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from accounts.models import Organization


class UsageEventKey(models.Model):
    """That (source, event_id) was accepted once, and in which month its event is stored."""

    pk = models.CompositePrimaryKey("source_id", "event_id")
    # No database foreign key, as on UsageEvent: the ingest statement writes key and event
    # together from the authenticated caller, and organizations are never deleted.
    source = models.ForeignKey(
        Organization,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,  # the primary key (source_id, event_id) serves lookups by source
        db_constraint=False,
    )
    event_id = models.CharField(max_length=128, db_collation="C")
    occurred_at = models.DateTimeField(
        help_text="The event's occurred_at as first accepted: where to find it (its partition)."
    )

    class Meta:
        verbose_name = "usage event key"

    def __str__(self) -> str:
        return f"{self.source_id}/{self.event_id}"


class UsageArchive(models.Model):
    """One month of usage events moved out of the database into a compressed file.

    Written in the transaction that detaches and drops the month's partition, so a row here means
    the file was complete (rows and checksum verified) before the data left the database.
    Ingestion refuses events of an archived month (`month_archived`).
    """

    month = models.DateField(unique=True, help_text="First day of the archived UTC month.")
    path = models.CharField(max_length=500, help_text="The gzip CSV file.")
    manifest_path = models.CharField(max_length=500)
    rows = models.BigIntegerField()
    sha256 = models.CharField(max_length=64, help_text="Of the compressed file.")
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    archived_at = models.DateTimeField()

    class Meta:
        ordering = ["-month"]
        constraints = [
            models.CheckConstraint(
                condition=Q(month__day=1), name="usage_archive_month_starts_on_day_one"
            ),
            models.CheckConstraint(
                condition=Q(rows__gte=0), name="usage_archive_rows_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"usage {self.month:%Y-%m}: {self.rows} rows in {self.path}"
