"""Token usage reported by providers for token-SLA contracts, and its hourly rollups."""

from __future__ import annotations

from django.contrib.postgres.indexes import BrinIndex
from django.db import models
from django.db.models import Q

from accounts.models import Organization
from contracts.models import Contract
from core.tags import tags_check, tags_field


class UsageStatus(models.TextChoices):
    """How one inference request ended, as the provider reports it.

    `rejected` means the request was refused before it was served because of the caller (invalid
    input, above the committed throughput); it does not count against availability.
    """

    SUCCESS = "success", "Success"
    TIMEOUT = "timeout", "Timeout"
    ERROR = "error", "Error"
    REJECTED = "rejected", "Rejected"


class UsageMode(models.TextChoices):
    """How a request was served: online (interactive, under the latency SLOs) or batch (queued,
    completed within the offering's batch deadline, priced at its batch tier)."""

    ONLINE = "online", "Online"
    BATCH = "batch", "Batch"


class UsageBatch(models.Model):
    """One POST of usage events by a provider, with what became of its events."""

    provider = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="usage_batches"
    )
    received_at = models.DateTimeField(db_index=True)
    event_count = models.PositiveIntegerField(default=0)
    accepted_count = models.PositiveIntegerField(default=0)
    duplicate_count = models.PositiveIntegerField(default=0)
    rejected_count = models.PositiveIntegerField(default=0)
    late_count = models.PositiveIntegerField(
        default=0, help_text="Accepted events whose billing period had already closed."
    )

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "usage batches"

    def __str__(self) -> str:
        return f"batch {self.pk} from {self.provider_id} at {self.received_at:%Y-%m-%d %H:%M:%S}"


class UsageEvent(models.Model):
    """One inference request on a token-SLA contract; counted once per (source, event_id).

    The table is range-partitioned by month of occurred_at (migration 0021, docs/architecture.md
    "Usage storage"): its database primary key is (id, occurred_at), and the uniqueness of
    (source, event_id) is held by UsageEventKey, which the ingest statement fills first.
    """

    # No database foreign-key constraints on this table, deliberately: it takes the hottest write
    # path, and the per-row RI triggers cost about a third of the bare COPY + INSERT throughput
    # (bench/ingest.py). The ingest service sets source from the authenticated caller and batch
    # from the row it creates in the same transaction, and checks in that transaction that the
    # contract is the caller's live token-SLA contract; contracts and organizations are never
    # deleted (PROTECT). Uniqueness of (source, event_id) stays a database constraint.
    source = models.ForeignKey(
        Organization,
        on_delete=models.PROTECT,
        related_name="usage_events",
        db_index=False,  # the unique (source, event_id) index serves lookups by source
        db_constraint=False,
        help_text="The provider organization that reported the event.",
    )
    event_id = models.CharField(
        max_length=128,
        db_collation="C",  # byte order: the unique index compares without locale rules
        help_text="The reporter's own id of the event.",
    )
    contract = models.ForeignKey(
        Contract,
        on_delete=models.PROTECT,
        related_name="usage_events",
        db_index=False,  # covered by the (contract, occurred_at) index
        db_constraint=False,
    )
    occurred_at = models.DateTimeField()
    input_tokens = models.BigIntegerField()
    output_tokens = models.BigIntegerField()
    cached_input_tokens = models.BigIntegerField(
        default=0,
        db_default=0,
        help_text="Of input_tokens, those served from the prompt cache.",
    )
    mode = models.CharField(
        max_length=8, choices=UsageMode.choices, default=UsageMode.ONLINE, db_default="online"
    )
    status = models.CharField(max_length=16, choices=UsageStatus.choices)
    ttft_ms = models.FloatField(null=True, blank=True, help_text="Time to first token.")
    e2e_ms = models.FloatField(null=True, blank=True, help_text="End-to-end latency.")
    tpot_ms = models.FloatField(null=True, blank=True, help_text="Time per output token.")
    received_at = models.DateTimeField()
    batch = models.ForeignKey(
        UsageBatch,
        on_delete=models.PROTECT,
        related_name="events",
        db_index=False,  # a BRIN index: batches are appended in id order
        db_constraint=False,
    )
    is_late = models.BooleanField(
        default=False,
        help_text=(
            "Arrived after the billing period containing occurred_at had closed (plus the grace"
            " window); billed as a late adjustment on the next invoice."
        ),
    )
    tags = tags_field(db_default={})

    class Meta:
        ordering = ["occurred_at", "id"]
        indexes = [
            models.Index(fields=["contract", "occurred_at"], name="usage_event_contract_time"),
            BrinIndex(fields=["batch"], name="usage_event_batch_brin", autosummarize=True),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(input_tokens__gte=0) & Q(output_tokens__gte=0),
                name="usage_event_tokens_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(cached_input_tokens__gte=0)
                & Q(cached_input_tokens__lte=models.F("input_tokens")),
                name="usage_event_cached_within_input",
            ),
            models.CheckConstraint(
                condition=Q(status__in=UsageStatus.values), name="usage_event_status_known"
            ),
            models.CheckConstraint(
                condition=Q(mode__in=UsageMode.values), name="usage_event_mode_known"
            ),
            tags_check("tags", "usage_event_tags_valid"),
            models.CheckConstraint(
                condition=(Q(ttft_ms__isnull=True) | Q(ttft_ms__gte=0))
                & (Q(e2e_ms__isnull=True) | Q(e2e_ms__gte=0))
                & (Q(tpot_ms__isnull=True) | Q(tpot_ms__gte=0)),
                name="usage_event_latency_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} ({self.status})"


class UsageRollup(models.Model):
    """One contract's usage in one UTC hour [hour, hour + 1 h), recomputed from its events.

    Token sums count successful requests only (only those are billed); the batch_ columns are
    the batch-mode part of them. Latency percentiles (continuous, as PostgreSQL's
    percentile_cont) are over successful online requests that reported the value (batch requests
    have a completion deadline, not latency SLOs). availability_pct = 100 x success /
    (total - rejected): timeouts and errors are the provider's failures, rejected requests were
    refused because of the caller and are left out; it is NULL when the hour has no request
    other than rejected ones.
    """

    contract = models.ForeignKey(Contract, on_delete=models.CASCADE, related_name="usage_rollups")
    hour = models.DateTimeField(help_text="Start of the UTC hour.")
    requests_total = models.PositiveIntegerField()
    requests_success = models.PositiveIntegerField()
    requests_timeout = models.PositiveIntegerField()
    requests_error = models.PositiveIntegerField()
    requests_rejected = models.PositiveIntegerField()
    input_tokens_success = models.BigIntegerField()
    output_tokens_success = models.BigIntegerField()
    cached_input_tokens_success = models.BigIntegerField(
        default=0, help_text="Of input_tokens_success, those served from the prompt cache."
    )
    batch_requests_success = models.PositiveIntegerField(
        default=0, help_text="Of requests_success, those served in batch mode."
    )
    batch_input_tokens_success = models.BigIntegerField(default=0)
    batch_output_tokens_success = models.BigIntegerField(default=0)
    ttft_p50_ms = models.FloatField(null=True, blank=True)
    ttft_p95_ms = models.FloatField(null=True, blank=True)
    ttft_p99_ms = models.FloatField(null=True, blank=True)
    e2e_p50_ms = models.FloatField(null=True, blank=True)
    e2e_p95_ms = models.FloatField(null=True, blank=True)
    e2e_p99_ms = models.FloatField(null=True, blank=True)
    tpot_p50_ms = models.FloatField(null=True, blank=True)
    tpot_p95_ms = models.FloatField(null=True, blank=True)
    tpot_p99_ms = models.FloatField(null=True, blank=True)
    availability_pct = models.DecimalField(max_digits=7, decimal_places=4, null=True, blank=True)
    late_events = models.PositiveIntegerField(
        default=0, help_text="Events of this hour that arrived after their period closed."
    )
    refreshed_at = models.DateTimeField()

    class Meta:
        ordering = ["-hour", "-id"]
        indexes = [models.Index(fields=["hour"], name="usage_rollup_hour")]
        constraints = [
            models.UniqueConstraint(fields=["contract", "hour"], name="usage_rollup_once"),
            models.CheckConstraint(
                condition=Q(
                    requests_total=models.F("requests_success")
                    + models.F("requests_timeout")
                    + models.F("requests_error")
                    + models.F("requests_rejected")
                ),
                name="usage_rollup_requests_add_up",
            ),
            models.CheckConstraint(
                condition=Q(input_tokens_success__gte=0) & Q(output_tokens_success__gte=0),
                name="usage_rollup_tokens_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(cached_input_tokens_success__gte=0)
                & Q(cached_input_tokens_success__lte=models.F("input_tokens_success"))
                & Q(batch_requests_success__lte=models.F("requests_success"))
                & Q(batch_input_tokens_success__gte=0)
                & Q(batch_input_tokens_success__lte=models.F("input_tokens_success"))
                & Q(batch_output_tokens_success__gte=0)
                & Q(batch_output_tokens_success__lte=models.F("output_tokens_success")),
                name="usage_rollup_parts_within_totals",
            ),
            models.CheckConstraint(
                condition=Q(availability_pct__isnull=True)
                | Q(availability_pct__gte=0, availability_pct__lte=100),
                name="usage_rollup_availability_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contract_id} @ {self.hour:%Y-%m-%d %H:00}"

    @property
    def cache_hit_rate_pct(self) -> float | None:
        """Share of successful input tokens served from the prompt cache, in percent."""
        if not self.input_tokens_success:
            return None
        return round(100 * self.cached_input_tokens_success / self.input_tokens_success, 4)

    @property
    def batch_share_pct(self) -> float | None:
        """Share of successful requests served in batch mode, in percent."""
        if not self.requests_success:
            return None
        return round(100 * self.batch_requests_success / self.requests_success, 4)


class UsageRollupRun(models.Model):
    """One sweep of the rollup refresh; the last one's start is the next sweep's watermark."""

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField()
    since = models.DateTimeField(
        null=True, blank=True, help_text="Events received from here on were looked at."
    )
    hours_refreshed = models.PositiveIntegerField()

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"rollup run {self.started_at:%Y-%m-%d %H:%M:%S}: {self.hours_refreshed} hours"
