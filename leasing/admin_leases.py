"""Admin for leases, holds and allocations, with a per-node allocation calendar.

Imported by leasing/admin.py; every change goes through leasing.services.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.text import Truncator

from accounts.admin import CustomerListFilter, ProviderListFilter
from contracts.models import AcceptanceRun
from inventory.models import Node
from leasing.models import Allocation, Hold, Lease, LeaseEvent, PreemptionNotice


class AllocationInline(admin.TabularInline[Allocation, Lease]):
    model = Allocation
    fk_name = "lease"
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "gpu",
        "period",
        "preemptible",
        "released_at",
        "ended_reason",
        "replaces",
        "rate_per_gpu_hour",
        "swap_event",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Allocation]:
        return super().get_queryset(request).select_related("gpu__node", "swap_event__contract")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PreemptionInline(admin.TabularInline[PreemptionNotice, Lease]):
    model = PreemptionNotice
    fk_name = "lease"
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "cut_at",
        "gpu_count",
        "preempted_by",
        "delivered_at",
        "executed_at",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class LeaseEventInline(admin.TabularInline[LeaseEvent, Any]):
    """The history of a lease or hold: status changes and the other changes, oldest first."""

    model = LeaseEvent
    extra = 0
    can_delete = False
    ordering = ["effective_at", "id"]
    verbose_name = "event"
    verbose_name_plural = "history"
    fields = readonly_fields = (
        "effective_at",
        "kind",
        "from_status",
        "to_status",
        "actor",
        "explanation",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class LeaseHistoryInline(LeaseEventInline):
    fk_name = "lease"


class HoldHistoryInline(LeaseEventInline):
    fk_name = "hold"


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin[Lease]):
    # Placement and workload are filters and the lease's page; the columns fit 1440 px.
    list_display = [
        "id",
        "contract",
        "customer",
        "offer_name",
        "gpus",
        "pricing_mode",
        "start",
        "end",
        "status",
    ]
    list_filter = [
        "status",
        ("offer__provider", ProviderListFilter),
        ("customer", CustomerListFilter),
        "pricing_mode",
        "workload",
        "placement",
    ]
    search_fields = ["contract__number", "customer__name", "offer__name"]
    list_select_related = ["contract", "customer", "offer"]
    inlines = [AllocationInline, PreemptionInline, LeaseHistoryInline]
    readonly_fields = [
        "customer",
        "offer",
        "contract",
        "hold",
        "gpu_count",
        "start",
        "end",
        "pricing_mode",
        "term_months",
        "price_per_gpu_hour",
        "currency",
        "status",
        "placement",
        "workload",
        "tags",
        "ended_at",
        "acceptance_runs",
    ]
    fields = tuple(readonly_fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # leases are made through holds, quotes or offers (the API)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a lease ends through leasing.services, its history stays

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only: saving the page would write the row past the services

    @admin.display(description="Offer", ordering="offer__name")
    def offer_name(self, lease: Lease) -> str:
        return Truncator(lease.offer.name).chars(40)

    @admin.display(description="GPUs", ordering="gpu_count")
    def gpus(self, lease: Lease) -> int:
        return lease.gpu_count

    @admin.display(description="Acceptance runs")
    def acceptance_runs(self, lease: Lease) -> str:
        runs = AcceptanceRun.objects.filter(contract_id=lease.contract_id).order_by("ran_at")
        return (
            "; ".join(
                f"{run.ran_at:%Y-%m-%d %H:%M} {run.metric}={run.measured_value} "
                f"({'pass' if run.passed else 'fail'})"
                for run in runs
            )
            or "none"
        )


@admin.register(Hold)
class HoldAdmin(admin.ModelAdmin[Hold]):
    list_display = [
        "id",
        "customer",
        "offer",
        "gpu_count",
        "start",
        "end",
        "status",
        "expires_at",
        "tags",
    ]
    list_filter = ["status"]
    list_select_related = ["customer", "offer"]
    readonly_fields = [f.name for f in Hold._meta.fields]
    inlines = [HoldHistoryInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a hold is released or expires through leasing.services

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only: saving the page would write the row past the services


@admin.register(Allocation)
class AllocationAdmin(admin.ModelAdmin[Allocation]):
    list_display = [
        "id",
        "gpu",
        "lease",
        "hold",
        "period",
        "preemptible",
        "released_at",
        "ended_reason",
    ]
    list_filter = ["preemptible", "ended_reason", "gpu__node__site"]
    search_fields = ["gpu__node__hostname", "lease__contract__number"]
    list_select_related = ["gpu__node", "lease", "hold"]
    readonly_fields = [f.name for f in Allocation._meta.fields]
    change_list_template = "admin/leasing/allocation/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # allocations are placed and released by leasing.services

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only: saving the page would write the row past the services

    def get_urls(self) -> list[URLPattern]:
        calendar = path(
            "calendar/",
            self.admin_site.admin_view(self.calendar_view),
            name="leasing_allocation_calendar",
        )
        return [calendar, *super().get_urls()]

    def calendar_view(self, request: HttpRequest) -> HttpResponse:
        """A node's GPUs by day: which lease or hold has each GPU, day by day."""
        if not self.has_view_permission(request):
            raise PermissionDenied  # it names customers; admin access alone does not show it
        days = min(max(int(request.GET.get("days", 14) or 14), 1), 62)
        start_param = request.GET.get("start")
        first = (
            datetime.fromisoformat(start_param).replace(tzinfo=UTC)
            if start_param
            else timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        )
        node = Node.objects.filter(pk=request.GET.get("node") or 0).first()
        rows: list[dict[str, Any]] = []
        day_starts = [first + timedelta(days=i) for i in range(days)]
        if node is not None:
            window_end = first + timedelta(days=days)
            allocations = list(
                Allocation.objects.filter(
                    gpu__node=node,
                    released_at__isnull=True,
                    period__overlap=DateTimeTZRange(first, window_end, "[)"),
                ).select_related("lease__contract", "hold")
            )
            for gpu in node.gpus.order_by("index"):
                cells = []
                for day in day_starts:
                    labels = [
                        _label(a)
                        for a in allocations
                        if a.gpu_id == gpu.pk
                        and a.period.lower < day + timedelta(days=1)
                        and (a.period.upper is None or a.period.upper > day)
                    ]
                    cells.append(", ".join(labels))
                rows.append({"gpu": gpu, "cells": cells})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Allocation calendar{f': {node.hostname}' if node else ''}",
            "nodes": Node.objects.select_related("site").order_by("site__name", "hostname"),
            "node": node,
            "days": day_starts,
            "rows": rows,
        }
        return TemplateResponse(request, "admin/leasing/allocation/calendar.html", context)


def _label(allocation: Allocation) -> str:
    if allocation.lease_id is not None and allocation.lease is not None:
        kind = "interruptible " if allocation.preemptible else ""
        return f"{kind}lease {allocation.lease_id} ({allocation.lease.contract.number})"
    return f"hold {allocation.hold_id}"
