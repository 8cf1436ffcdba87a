"""The fleet page (every node by payback) and one asset's page: chart, payback, months.

The pages show what the nightly job wrote; the one write is the "Recompute economics now"
action (economics.services.assets).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import F, QuerySet
from django.db.models.expressions import Combinable
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import mark_safe

from billing.admin import ReadOnlyMixin
from core.admin import ServiceAdminMixin
from core.text import counted
from economics.admin.display import LEGEND as FIGURE_LEGEND
from economics.admin.display import (
    MONTH_LEGEND,
    NOT_AVAILABLE,
    MonthRow,
    money,
    payback_of,
    payback_status,
    payback_summary_rows,
    percent,
)
from economics.charts import payback_chart_svg
from economics.models import AssetEconomics, AssetMonth, AssetPayback
from economics.services.assets import asset_economics_refresh


@admin.register(AssetEconomics)
class AssetEconomicsAdmin(ReadOnlyMixin, ServiceAdminMixin[AssetEconomics]):
    """The fleet by payback (paid back first, then soonest projected), and one asset's page:
    chart, payback summary and the monthly table. Read-only but for the recompute action."""

    # Site and GPU count are filters and the asset page's fields; the columns are the figures.
    list_display = [
        "hostname",
        "gpu_model",
        "capex_amount",
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
    # The legend of the figures in the columns (the asset page explains the rest).
    legend = [
        (term, meaning)
        for term, meaning in FIGURE_LEGEND.items()
        if term
        in {"Capex", "Net cash flow (life)", "Payback", "ROI to date", "Utilization", "Book value"}
    ]
    change_form_template = "admin/economics/asseteconomics/change_form.html"
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
        return money(node.capex, node.capex_currency)

    @admin.display(description="Months of life", ordering="payback__months_of_life")
    def months_of_life(self, node: AssetEconomics) -> str:
        payback = payback_of(node)
        return str(payback.months_of_life) if payback else NOT_AVAILABLE

    @admin.display(description="Net cash flow (life)", ordering="payback__cumulative_net_cash_flow")
    def cumulative_net_cash_flow(self, node: AssetEconomics) -> str:
        payback = payback_of(node)
        if payback is None:
            return NOT_AVAILABLE
        return money(payback.cumulative_net_cash_flow, payback.currency)

    @admin.display(description="Payback", ordering="projected_payback_months")
    def payback_standing(self, node: AssetEconomics) -> str:
        return payback_status(payback_of(node), short=True)

    @admin.display(description="ROI to date", ordering="payback__roi_to_date")
    def roi_to_date(self, node: AssetEconomics) -> str:
        payback = payback_of(node)
        return percent(payback.roi_to_date) if payback else NOT_AVAILABLE

    @admin.display(
        description="Utilization",
        ordering="payback__trailing_utilization",
    )
    def trailing_utilization(self, node: AssetEconomics) -> str:
        payback = payback_of(node)
        return percent(payback.trailing_utilization) if payback else NOT_AVAILABLE

    @admin.display(description="Book value", ordering="payback__book_value")
    def book_value(self, node: AssetEconomics) -> str:
        payback = payback_of(node)
        return money(payback.book_value, payback.currency) if payback else NOT_AVAILABLE

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
            "economics_month_legend": MONTH_LEGEND,
        }

    # ---------------------------------------------------------------- the recompute action

    def has_recompute_permission(self, request: HttpRequest) -> bool:
        """Who may recompute: holders of the proxy's own permission (superusers have it)."""
        return request.user.has_perm("economics.recompute_asseteconomics")

    @admin.action(description="Recompute economics now", permissions=["recompute"])
    def recompute_economics(self, request: HttpRequest, queryset: QuerySet[AssetEconomics]) -> None:
        """Recompute the selected nodes' months and payback now instead of tonight."""
        node_ids = sorted(queryset.values_list("pk", flat=True))
        result = self.service_call(request, lambda: asset_economics_refresh(node_ids=node_ids))
        if result is None:
            return
        nodes, months, unattributed = result
        self.message_user(
            request,
            f"Recomputed the economics of {counted(nodes, 'node')}: {counted(months, 'month')}.",
            level=messages.SUCCESS,
        )
        if unattributed:
            self.message_user(
                request,
                f"{counted(len(unattributed), 'revenue line part')} could not be attributed "
                "to a node; the nightly economics run lists them.",
                level=messages.WARNING,
            )
