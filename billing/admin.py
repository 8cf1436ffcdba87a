"""Billing admin: usage data, run logs and Stripe records, and the read-only bases the billing
admin modules share; invoices are in admin_invoices, credit notes in admin_credit_notes, the
ledger in admin_ledger, asset economics in admin_economics.

Everything here is read-only: usage and rollups are derived data, invoice lines come from
rating, and issued documents never change.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from accounts.admin import ProviderListFilter
from billing.models import (
    BillingRun,
    StripeCustomer,
    StripeEvent,
    UsageArchive,
    UsageBatch,
    UsageEvent,
    UsageRollup,
    UsageRollupRun,
)


class ReadOnlyMixin:
    """Rows written by services only: visible, never added, edited or removed by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(ReadOnlyMixin, admin.ModelAdmin[Any]):
    """A read-only model admin (see ReadOnlyMixin)."""


@admin.register(UsageArchive)
class UsageArchiveAdmin(ReadOnlyAdmin):
    """Months of usage events archived to files by `manage.py usage_archive`."""

    list_display = ["month", "rows", "input_tokens", "output_tokens", "path", "archived_at"]
    ordering = ["-month"]


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
    list_filter = [("provider", ProviderListFilter)]
    list_select_related = ["provider"]
    date_hierarchy = "received_at"


@admin.register(UsageEvent)
class UsageEventAdmin(ReadOnlyAdmin):
    """Single inference requests as reported: mode, cached tokens and cost-attribution tags."""

    list_display = [
        "event_id",
        "contract",
        "occurred_at",
        "mode",
        "status",
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "tags",
        "is_late",
    ]
    list_filter = ["mode", "status", "is_late"]
    list_select_related = ["contract"]
    search_fields = ["=event_id", "contract__number"]
    # The table is the largest there is: no exact count on every page.
    show_full_result_count = False


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
        "cache_hit_rate_pct",
        "batch_share_pct",
        "refreshed_at",
    ]
    list_select_related = ["contract"]
    search_fields = ["contract__number"]
    date_hierarchy = "hour"


@admin.register(UsageRollupRun)
class UsageRollupRunAdmin(ReadOnlyAdmin):
    """The log of rollup sweeps (the last one is the next one's watermark)."""

    list_display = ["started_at", "finished_at", "since", "hours_refreshed"]


# Invoices and credit notes: read-only documents and the actions on them (their own module);
# the ledger: read-only accounts, transactions and entries; funds, payouts, budgets and usage
# alert rules.
from billing import (  # noqa: E402, F401
    admin_budgets,
    admin_credit_notes,
    admin_funds,
    admin_invoices,
    admin_ledger,
    admin_payouts,
)

# ------------------------------------------------------------------ run logs and Stripe


@admin.register(BillingRun)
class BillingRunAdmin(ReadOnlyAdmin):
    """The log of billing runs: counts, failures, abandoned runs and who picked them up."""

    list_display = [
        "id",
        "kind",
        "outcome",
        "started_at",
        "finished_at",
        "as_of",
        "drafts_created",
        "drafts_refreshed",
        "finalized",
        "delivered",
        "picked_up",
        "picked_up_by",
        "failure_count",
    ]
    list_filter = ["kind", "outcome"]
    list_select_related = ["picked_up_by"]
    date_hierarchy = "started_at"

    @admin.display(description="Failures")
    def failure_count(self, run: BillingRun) -> int:
        """How many failures the run recorded."""
        return len(run.failures or [])


@admin.register(StripeCustomer)
class StripeCustomerAdmin(ReadOnlyAdmin):
    """Which Stripe customer stands for which organization."""

    list_display = ["organization", "stripe_id", "created_at"]
    list_select_related = ["organization"]
    search_fields = ["stripe_id", "organization__name", "organization__slug"]


@admin.register(StripeEvent)
class StripeEventAdmin(ReadOnlyAdmin):
    """Stripe webhook events as received, and what each did."""

    list_display = ["event_id", "type", "invoice", "outcome", "received_at"]
    list_filter = ["type"]
    list_select_related = ["invoice"]
    search_fields = ["event_id", "invoice__number"]
    date_hierarchy = "received_at"
