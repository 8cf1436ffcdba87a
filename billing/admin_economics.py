"""Billing admin for asset economics: the fleet page, one asset's payback page, FX rates,
capacity signals and the log of economics runs.

Imported by billing/admin.py. The pages show what the nightly job wrote (asset months, payback,
signals); the writes are the "Recompute economics now" action (billing.services.economics) and
the FX rates operators record, correct and remove (billing.services.fx).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Case, F, IntegerField, QuerySet, Value, When
from django.db.models.expressions import Combinable, OrderBy
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from billing.admin import ReadOnlyAdmin, ReadOnlyMixin
from billing.charts import payback_chart_svg
from billing.models import (
    AssetEconomics,
    AssetMonth,
    AssetPayback,
    CapacitySignal,
    EconomicsRun,
    FxRate,
    SignalLevel,
)
from billing.payback import TRAILING_MONTHS
from billing.services.economics import asset_economics_refresh
from billing.services.fx import (
    FxRateInput,
    fx_rate_create,
    fx_rate_delete,
    fx_rate_errors,
    fx_rate_update,
)
from core.errors import ApplicationError
from inventory.schemas import parse

NOT_AVAILABLE = "-"
FX_RATE_FIELDS = list(FxRateInput.model_fields)


# ------------------------------------------------------------------ formatting


def _number(value: Decimal | None, places: int = 2) -> str:
    """1234.5 -> "1,234.50"; None -> "-"."""
    if value is None:
        return NOT_AVAILABLE
    return f"{value:,.{places}f}"


def _money(value: Decimal | None, currency: str) -> str:
    """An amount with its currency: "300,000.00 USD"."""
    if value is None:
        return NOT_AVAILABLE
    return f"{_number(value)} {currency}"


def _percent(value: Decimal | None) -> str:
    """A fraction as a percentage: 0.709677 -> "70.97 %"."""
    if value is None:
        return NOT_AVAILABLE
    return f"{value * 100:,.2f} %"


def _reason(code: str) -> str:
    """A machine reason as words: "no_allocated_gpu_hours" -> "no allocated gpu hours"."""
    return code.replace("_", " ") if code else "not computed"


def _ratio(value: Decimal | None, reason: str, show: Callable[[Decimal], str]) -> str:
    """A computed ratio, or why there is none."""
    return show(value) if value is not None else f"n/a ({_reason(reason)})"


def _payback_of(node: AssetEconomics) -> AssetPayback | None:
    """The node's payback row, or None before the first run."""
    try:
        return node.payback
    except AssetPayback.DoesNotExist:
        return None


def payback_status(payback: AssetPayback | None) -> str:
    """Paid back in which month, or the projection, or why there is none."""
    if payback is None:
        return "not computed yet"
    if payback.paid_back_in_month is not None and payback.paid_back_on is not None:
        return f"paid back in month {payback.paid_back_in_month} ({payback.paid_back_on:%Y-%m})"
    if payback.projected_payback_months is not None:
        return f"projected in {payback.projected_payback_months} months"
    return f"no projection ({_reason(payback.projection_reason)})"


def conversion_text(conversion: dict[str, Any]) -> str:
    """One FX conversion of a month as a sentence, e.g.
    "revenue: 10,137.60 USD → 9,123.84 EUR at 0.9 (USD/EUR of 2027-01-01)"."""
    try:
        amount, converted = Decimal(conversion["amount"]), Decimal(conversion["converted"])
        rate = f"{Decimal(conversion['rate']).normalize():f}"
        source, target = conversion["from"], conversion["to"]
        pair, how = f"{source}/{target}", f"at {rate}"
        if conversion.get("inverted"):
            # The opposite pair was recorded: the amount was divided by it.
            pair, how = f"{target}/{source}", f"at 1/{rate}"
        return (
            f"{conversion.get('what', 'amount')}: {_money(amount, source)} → "
            f"{_money(converted, target)} {how} ({pair} of {conversion['rate_valid_on']})"
        )
    except (KeyError, TypeError, InvalidOperation):
        return json.dumps(conversion, sort_keys=True)


@dataclass(frozen=True, slots=True)
class MonthRow:
    """One asset month as the table on the asset page shows it."""

    month: str
    month_of_life: int
    in_service_hours: str
    available_gpu_hours: str
    allocated_gpu_hours: str
    utilization: str
    revenue: str
    energy_cost: str
    opex: str
    depreciation: str
    net_cash_flow: str
    cumulative_net_cash_flow: str
    book_value: str
    documents: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, month: AssetMonth) -> MonthRow:
        """The row of one stored month."""
        detail = month.revenue_detail if isinstance(month.revenue_detail, dict) else {}
        return cls(
            month=f"{month.month:%Y-%m}",
            month_of_life=month.month_of_life,
            in_service_hours=_number(month.in_service_hours),
            available_gpu_hours=_number(month.available_gpu_hours),
            allocated_gpu_hours=_number(month.allocated_gpu_hours),
            utilization=_percent(month.utilization),
            revenue=_number(month.revenue),
            energy_cost=_number(month.energy_cost),
            opex=_number(month.opex),
            depreciation=_number(month.depreciation),
            net_cash_flow=_number(month.net_cash_flow),
            cumulative_net_cash_flow=_number(month.cumulative_net_cash_flow),
            book_value=_number(month.book_value),
            documents=[str(number) for number in detail.get("documents", [])],
            warnings=[str(warning) for warning in month.warnings or []],
            conversions=[conversion_text(c) for c in detail.get("conversions", [])],
        )


def payback_summary_rows(payback: AssetPayback | None) -> list[tuple[str, str]]:
    """The payback summary as (label, value) pairs; empty before the first run."""
    if payback is None:
        return []
    currency = payback.currency
    per_hour = f"{currency} per GPU-hour"
    return [
        ("Capex", _money(payback.capex, currency)),
        ("Months of life", str(payback.months_of_life)),
        ("Cumulative net cash flow", _money(payback.cumulative_net_cash_flow, currency)),
        ("Payback", payback_status(payback)),
        ("ROI to date", _ratio(payback.roi_to_date, "no_capex", _percent)),
        (
            "Revenue per allocated GPU-hour",
            _ratio(
                payback.revenue_per_gpu_hour,
                payback.revenue_per_gpu_hour_reason,
                lambda value: f"{_number(value, 4)} {per_hour}",
            ),
        ),
        (
            f"Break-even rate (trailing {TRAILING_MONTHS} months, depreciation included)",
            _ratio(
                payback.break_even_rate_per_gpu_hour,
                payback.break_even_reason,
                lambda value: f"{_number(value, 4)} {per_hour}",
            ),
        ),
        (
            f"Utilization (trailing {TRAILING_MONTHS} months)",
            _ratio(payback.trailing_utilization, "no_available_gpu_hours", _percent),
        ),
        ("Book value", _money(payback.book_value, currency)),
        ("Computed at", f"{payback.computed_at:%Y-%m-%d %H:%M} UTC"),
    ]


# ------------------------------------------------------------------ fleet and asset pages


@admin.register(AssetEconomics)
class AssetEconomicsAdmin(ReadOnlyMixin, admin.ModelAdmin[AssetEconomics]):
    """The fleet by payback (paid back first, then soonest projected), and one asset's page:
    chart, payback summary and the monthly table. Read-only but for the recompute action."""

    list_display = [
        "hostname",
        "site",
        "gpu_model",
        "gpu_count",
        "capex_amount",
        "months_of_life",
        "cumulative_net_cash_flow",
        "payback_standing",
        "roi_to_date",
        "trailing_utilization",
        "book_value",
    ]
    list_filter = ["site", "gpu_model", "status"]
    search_fields = ["hostname"]
    list_select_related = ["site", "gpu_model", "payback"]
    actions = ["recompute_economics"]
    change_form_template = "admin/billing/asseteconomics/change_form.html"
    fieldsets = [
        (
            "Asset",
            {
                "fields": [
                    ("hostname", "status"),
                    ("site", "gpu_model", "gpu_count"),
                    ("capex", "capex_currency", "acquired_on"),
                    ("service_life_months", "salvage_value"),
                    ("power_idle_kw", "power_full_kw"),
                ]
            },
        )
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AssetEconomics]:
        """Every node with its payback standing annotated for the default order."""
        return (
            super()
            .get_queryset(request)
            .annotate(
                paid_back_in_month=F("payback__paid_back_in_month"),
                projected_payback_months=F("payback__projected_payback_months"),
            )
        )

    def get_ordering(self, request: HttpRequest) -> list[str | Combinable]:
        """Paid back first (earliest month of life first), then the soonest projected payback;
        nodes without either (or without a run yet) last."""
        return [
            F("paid_back_in_month").asc(nulls_last=True),
            F("projected_payback_months").asc(nulls_last=True),
            "hostname",
        ]

    @admin.display(description="Capex", ordering="capex")
    def capex_amount(self, node: AssetEconomics) -> str:
        return _money(node.capex, node.capex_currency)

    @admin.display(description="Months of life", ordering="payback__months_of_life")
    def months_of_life(self, node: AssetEconomics) -> str:
        payback = _payback_of(node)
        return str(payback.months_of_life) if payback else NOT_AVAILABLE

    @admin.display(
        description="Cumulative net cash flow", ordering="payback__cumulative_net_cash_flow"
    )
    def cumulative_net_cash_flow(self, node: AssetEconomics) -> str:
        payback = _payback_of(node)
        if payback is None:
            return NOT_AVAILABLE
        return _money(payback.cumulative_net_cash_flow, payback.currency)

    @admin.display(description="Paid back / projected", ordering="projected_payback_months")
    def payback_standing(self, node: AssetEconomics) -> str:
        return payback_status(_payback_of(node))

    @admin.display(description="ROI to date", ordering="payback__roi_to_date")
    def roi_to_date(self, node: AssetEconomics) -> str:
        payback = _payback_of(node)
        return _percent(payback.roi_to_date) if payback else NOT_AVAILABLE

    @admin.display(
        description=f"Utilization ({TRAILING_MONTHS} months)",
        ordering="payback__trailing_utilization",
    )
    def trailing_utilization(self, node: AssetEconomics) -> str:
        payback = _payback_of(node)
        return _percent(payback.trailing_utilization) if payback else NOT_AVAILABLE

    @admin.display(description="Book value", ordering="payback__book_value")
    def book_value(self, node: AssetEconomics) -> str:
        payback = _payback_of(node)
        return _money(payback.book_value, payback.currency) if payback else NOT_AVAILABLE

    # ---------------------------------------------------------------- the asset page

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: AssetEconomics | None = None,
    ) -> HttpResponse:
        """The node's fields, then its chart, payback summary and months."""
        if obj is not None:
            context.update(self.economics_context(obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def economics_context(self, node: AssetEconomics) -> dict[str, Any]:
        """What the asset page shows below the node's fields."""
        months = list(AssetMonth.objects.filter(node_id=node.pk).order_by("month"))
        payback = AssetPayback.objects.filter(node_id=node.pk).first()
        currency = payback.currency if payback else node.capex_currency
        svg = payback_chart_svg(
            months=[(month.month, month.cumulative_net_cash_flow) for month in months],
            capex=payback.capex if payback else node.capex,
            currency=currency,
            payback_month=payback.paid_back_on if payback else None,
        )
        return {
            # Safe: payback_chart_svg escapes every text it writes.
            "economics_chart": mark_safe(svg),
            "economics_currency": currency,
            "economics_summary": payback_summary_rows(payback),
            "economics_months": [MonthRow.of(month) for month in months],
        }

    # ---------------------------------------------------------------- the recompute action

    def has_recompute_permission(self, request: HttpRequest) -> bool:
        """Who may recompute: holders of the proxy's own permission (superusers have it)."""
        return request.user.has_perm("billing.recompute_asseteconomics")

    @admin.action(description="Recompute economics now", permissions=["recompute"])
    def recompute_economics(self, request: HttpRequest, queryset: QuerySet[AssetEconomics]) -> None:
        """Recompute the selected nodes' months and payback now instead of tonight."""
        node_ids = sorted(queryset.values_list("pk", flat=True))
        try:
            nodes, months, unattributed = asset_economics_refresh(node_ids=node_ids)
        except ApplicationError as error:
            self.message_user(request, f"{error.message} ({error.code})", level=messages.ERROR)
            return
        self.message_user(
            request,
            f"Recomputed the economics of {nodes} node(s): {months} month(s).",
            level=messages.SUCCESS,
        )
        if unattributed:
            self.message_user(
                request,
                f"{len(unattributed)} revenue line part(s) could not be attributed to a node; "
                "the nightly economics run lists them.",
                level=messages.WARNING,
            )


# ------------------------------------------------------------------ FX rates


class FxRateForm(forms.ModelForm[FxRate]):
    """An FX rate, checked with the service's rules (same wording as the API) and for a rate
    already recorded for the pair and day, so that both are form errors, not a failed save."""

    class Meta:
        model = FxRate
        fields = FX_RATE_FIELDS

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in ("base_currency", "quote_currency"):
            if data.get(name):
                data[name] = data[name].strip().upper()
        if all(data.get(name) is not None for name in ("base_currency", "quote_currency", "rate")):
            errors = fx_rate_errors(
                base_currency=data["base_currency"],
                quote_currency=data["quote_currency"],
                rate=data["rate"],
            )
            for error in errors:
                self.add_error(error.field if error.field in self.fields else None, error.message)
        return data


@admin.register(FxRate)
class FxRateAdmin(admin.ModelAdmin[FxRate]):
    """Operators record, correct and remove FX rates through billing.services.fx; the economics
    job converts with the latest rate valid at each month's end from its next run on."""

    form = FxRateForm
    list_display = [
        "base_currency",
        "quote_currency",
        "rate",
        "valid_on",
        "source",
        "recorded_by",
        "updated_at",
    ]
    list_filter = ["base_currency", "quote_currency", "valid_on", "recorded_by"]
    search_fields = ["source", "base_currency", "quote_currency"]
    list_select_related = ["recorded_by"]
    date_hierarchy = "valid_on"

    def get_readonly_fields(self, request: HttpRequest, obj: FxRate | None = None) -> list[str]:
        return [] if obj is None else ["recorded_by", "created_at", "updated_at"]

    def save_model(self, request: HttpRequest, obj: FxRate, form: Any, change: bool) -> None:
        """Create or correct the rate through the service, recorded as this user's."""
        data = form.cleaned_data
        if change:
            saved = fx_rate_update(
                fx_rate=obj,
                changes={name: data[name] for name in form.changed_data if name in FX_RATE_FIELDS},
                recorded_by_organization=None,
                recorded_by=request.user,
            )
        else:
            saved = fx_rate_create(
                fields=parse(FxRateInput, {name: data[name] for name in FX_RATE_FIELDS}),
                recorded_by_organization=None,
                recorded_by=request.user,
            )
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: FxRate) -> None:
        fx_rate_delete(fx_rate=obj, deleted_by_organization=None)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[FxRate]) -> None:
        for fx_rate in queryset.order_by("pk"):
            fx_rate_delete(fx_rate=fx_rate, deleted_by_organization=None)


# ------------------------------------------------------------------ signals and runs


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
        return _percent(signal.utilization)

    @admin.display(description="Reasons")
    def reasons_text(self, signal: CapacitySignal) -> str:
        return "; ".join(str(reason) for reason in signal.reasons or []) or NOT_AVAILABLE


def _unattributed_lines(run: EconomicsRun) -> list[Any]:
    """The run's unattributed revenue lines (a JSON list)."""
    return run.unattributed if isinstance(run.unattributed, list) else []


@admin.register(EconomicsRun)
class EconomicsRunAdmin(ReadOnlyAdmin):
    """The log of nightly economics runs, with the revenue no node could be found for."""

    list_display = [
        "started_at",
        "finished_at",
        "nodes",
        "months",
        "signals_raised",
        "unattributed_count",
    ]
    date_hierarchy = "started_at"
    fields = [
        ("started_at", "finished_at"),
        ("nodes", "months", "signals_raised"),
        "unattributed_revenue",
    ]
    readonly_fields = ["unattributed_revenue"]

    @admin.display(description="Unattributed revenue lines")
    def unattributed_count(self, run: EconomicsRun) -> int:
        return len(_unattributed_lines(run))

    @admin.display(description="Unattributed revenue")
    def unattributed_revenue(self, run: EconomicsRun) -> SafeString:
        """The revenue lines no node was found for, as the run recorded them."""
        lines = _unattributed_lines(run)
        if not lines:
            return format_html("{}", "none")
        return format_html(
            "<pre class='unattributed'>{}</pre>",
            json.dumps(lines, indent=2, sort_keys=True, ensure_ascii=False),
        )
