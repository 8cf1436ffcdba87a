"""Capacity signals in the admin, most severe first (read-only: the nightly job writes them)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Case, IntegerField, Value, When
from django.db.models.expressions import Combinable, OrderBy
from django.http import HttpRequest

from billing.admin import ReadOnlyAdmin
from economics.admin.display import NOT_AVAILABLE, percent
from economics.models import CapacitySignal, SignalLevel


def _severity() -> OrderBy:
    """Act now first, then plan scaling, then raised for unmet quotes alone, then OK."""
    return Case(
        When(level=SignalLevel.ACT_NOW, then=Value(0)),
        When(level=SignalLevel.PLAN_SCALING, then=Value(1)),
        When(raised=True, then=Value(2)),
        default=Value(3),
        output_field=IntegerField(),
    ).asc()


@admin.register(CapacitySignal)
class CapacitySignalAdmin(ReadOnlyAdmin):
    """Pools (GPU model at a site) by how urgently they need capacity, most severe first."""

    list_display = [
        "evaluated_on",
        "site",
        "gpu_model",
        "level",
        "raised",
        "utilization_pct",
        "gpu_count",
        "allocated_gpu_hours",
        "available_gpu_hours",
        "unmet_quotes",
        "unmet_quotes_before",
        "reasons_text",
    ]
    list_filter = ["level", "raised", "evaluated_on", "site", "gpu_model"]
    list_select_related = ["site", "gpu_model"]
    date_hierarchy = "evaluated_on"

    def get_ordering(self, request: HttpRequest) -> list[str | Combinable]:
        return [_severity(), "-evaluated_on", "site__name", "gpu_model__name"]

    @admin.display(description="Utilization", ordering="utilization")
    def utilization_pct(self, signal: CapacitySignal) -> str:
        return percent(signal.utilization)

    @admin.display(description="Reasons")
    def reasons_text(self, signal: CapacitySignal) -> str:
        return "; ".join(str(reason) for reason in signal.reasons or []) or NOT_AVAILABLE
