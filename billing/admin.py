"""Read-only admin of usage batches, hourly rollups and rollup runs (they are derived data)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from billing.models import UsageBatch, UsageRollup, UsageRollupRun


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    """Rows written by services only: visible, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(UsageBatch)
class UsageBatchAdmin(ReadOnlyAdmin):
    """Each POST of usage events and what became of its events."""

    list_display = [
        "id",
        "provider",
        "received_at",
        "event_count",
        "accepted_count",
        "duplicate_count",
        "rejected_count",
        "late_count",
    ]
    list_filter = ["provider"]
    list_select_related = ["provider"]
    date_hierarchy = "received_at"


@admin.register(UsageRollup)
class UsageRollupAdmin(ReadOnlyAdmin):
    """Hourly usage per contract."""

    list_display = [
        "contract",
        "hour",
        "requests_total",
        "requests_success",
        "availability_pct",
        "ttft_p95_ms",
        "e2e_p99_ms",
        "output_tokens_success",
        "refreshed_at",
    ]
    list_select_related = ["contract"]
    search_fields = ["contract__number"]
    date_hierarchy = "hour"


@admin.register(UsageRollupRun)
class UsageRollupRunAdmin(ReadOnlyAdmin):
    """The log of rollup sweeps (the last one is the next one's watermark)."""

    list_display = ["started_at", "finished_at", "since", "hours_refreshed"]
