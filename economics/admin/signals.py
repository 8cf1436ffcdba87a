"""Capacity signals in the admin, most severe first (read-only: the nightly job writes them)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.db.models import Case, IntegerField, Value, When
from django.db.models.expressions import Combinable, OrderBy
from django.http import HttpRequest

from billing.admin import ReadOnlyAdmin
from economics.admin.display import NOT_AVAILABLE, percent
from economics.models import CapacitySignal, SignalLevel


def signal_text(signal: CapacitySignal) -> str:
    """The level and whether the signal is raised, in one phrase that cannot contradict itself:
    a pool at level OK is raised only because quotes it could not serve are growing."""
    if signal.level != SignalLevel.OK:
        return f"{signal.get_level_display()} (raised)"
    if signal.raised:
        return "Raised: unmet quotes growing (utilization OK)"
    return "OK (not raised)"


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

    # One "signal" column says the level and whether it is raised in one phrase, so the two
    # never read as a contradiction ("OK" beside "raised"); hours stay on the signal's page.
    list_display = [
        "evaluated_on",
        "pool",
        "signal",
        "utilization_pct",
        "gpu_count",
        "unmet_quotes_text",
        "reasons_text",
    ]
    list_filter = ["level", "raised", "evaluated_on", "site", "gpu_model"]
    # The signal's page: the one phrase for level and "raised", then the figures behind it.
    fields = [
        ("evaluated_on", "provider"),
        ("site", "gpu_model"),
        "signal",
        "reasons_text",
        ("window_start", "window_end"),
        ("gpu_count", "utilization_pct"),
        ("available_gpu_hours", "allocated_gpu_hours"),
        ("unmet_quotes", "unmet_quotes_before", "unmet_growing"),
        "computed_at",
    ]
    readonly_fields = ["signal", "reasons_text", "utilization_pct"]
    list_select_related = ["site", "gpu_model"]

    @property
    def legend(self) -> list[tuple[str, str]]:
        """What the columns mean, with the thresholds this deployment uses."""
        act, plan = (
            settings.ECONOMICS_ACT_NOW_UTILIZATION_PCT,
            settings.ECONOMICS_PLAN_SCALING_UTILIZATION_PCT,
        )
        return [
            ("Act now", f"utilization at or above {act} %: raised."),
            ("Plan scaling", f"utilization at or above {plan} %: raised."),
            (
                "Raised: unmet quotes growing",
                "utilization is OK, but quotes refused for "
                "lack of capacity grew on the week before.",
            ),
            ("OK (not raised)", "nothing to do for this pool."),
            ("Utilization", "GPU-hours leased out ÷ GPU-hours available over the window."),
            ("Unmet quotes", "quote requests refused for lack of capacity (the week before)."),
        ]

    date_hierarchy = "evaluated_on"

    def get_ordering(self, request: HttpRequest) -> list[str | Combinable]:
        return [_severity(), "-evaluated_on", "site__name", "gpu_model__name"]

    @admin.display(description="Pool", ordering="site__name")
    def pool(self, signal: CapacitySignal) -> str:
        return f"{signal.gpu_model.name} at {signal.site.name}"

    @admin.display(description="Signal", ordering="level")
    def signal(self, signal: CapacitySignal) -> str:
        return signal_text(signal)

    @admin.display(description="Unmet quotes (week before)", ordering="unmet_quotes")
    def unmet_quotes_text(self, signal: CapacitySignal) -> str:
        return f"{signal.unmet_quotes} ({signal.unmet_quotes_before})"

    @admin.display(description="Utilization", ordering="utilization")
    def utilization_pct(self, signal: CapacitySignal) -> str:
        return percent(signal.utilization)

    @admin.display(description="Reasons")
    def reasons_text(self, signal: CapacitySignal) -> str:
        return "; ".join(str(reason) for reason in signal.reasons or []) or NOT_AVAILABLE
