"""Asset months and payback: every node's months in its capex currency, and its standing.

Idempotent: each run recomputes every month of every node from the facts (allocations, outages,
issued invoices and credit notes, FX rates) and replaces what the last run wrote, so late usage,
a credit note or a corrected FX rate shows up the next night without any bookkeeping.
"""

from __future__ import annotations

import calendar
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from economics import payback
from economics.fx import Conversion, FxTable
from economics.models import AssetMonth, AssetPayback
from economics.selectors.gpu_hours import HOUR, HOURS, GpuSeconds, gpu_seconds
from economics.selectors.revenue import RevenuePiece, next_month, revenue_attribute
from inventory.models import Node

ZERO = Decimal("0")
WRITE_BATCH = 2000


@dataclass(slots=True)
class NodeMonths:
    """What the job computed for one node: its month rows and payback row (unsaved)."""

    months: list[AssetMonth]
    payback: AssetPayback


def _hours_in_month(month: date) -> Decimal:
    return Decimal(calendar.monthrange(month.year, month.month)[1] * 24)


class _Converter:
    """Converts into one asset's currency and remembers what it did, for the month's record."""

    def __init__(self, fx: FxTable, currency: str, month: date) -> None:
        self.fx, self.currency = fx, currency
        self.on = next_month(month) - timedelta(days=1)
        self.conversions: list[tuple[str, Conversion]] = []
        self.missing: dict[str, Decimal] = defaultdict(Decimal)

    def __call__(self, amount: Decimal, source: str, what: str) -> Decimal:
        if source == self.currency or not amount:
            return amount
        conversion = self.fx.convert(amount, source, self.currency, self.on)
        if conversion is None:
            self.missing[f"{what}:{source}"] += amount
            return ZERO
        self.conversions.append((what, conversion))
        return conversion.converted


def node_months(
    node: Node,
    buckets: dict[date, GpuSeconds],
    revenue: dict[date, list[RevenuePiece]],
    fx: FxTable,
    computed_at: datetime,
) -> NodeMonths:
    """One node's months in its capex currency, its payback, with conversions and warnings."""
    site = node.site
    asset = payback.Asset(
        capex=node.capex,
        salvage=node.salvage_value,
        service_life_months=node.service_life_months,
        currency=node.capex_currency,
        power_idle_kw=node.power_idle_kw,
        power_full_kw=node.power_full_kw,
    )
    facts: list[payback.MonthFacts] = []
    details: list[tuple[dict[str, Any], list[str]]] = []
    for month, seconds in sorted(buckets.items()):
        convert = _Converter(fx, asset.currency, month)
        pieces = revenue.get(month, [])
        by_kind: dict[str, Decimal] = defaultdict(Decimal)
        by_currency: dict[str, Decimal] = defaultdict(Decimal)
        documents: set[str] = set()
        for piece in pieces:
            by_kind[piece.kind] += piece.amount
            by_currency[piece.currency] += piece.amount
            documents.add(piece.document)
        revenue_total = sum(
            (convert(amount, currency, "revenue") for currency, amount in by_currency.items()),
            ZERO,
        )
        power_price = convert(site.power_price_per_kwh, site.power_currency, "power_price")
        opex = convert(site.opex_per_node_month, site.opex_currency, "opex")
        facts.append(
            payback.MonthFacts(
                month=month,
                hours_in_month=_hours_in_month(month),
                in_service_hours=(seconds.service / HOUR).quantize(HOURS),
                available_gpu_hours=(seconds.available / HOUR).quantize(HOURS),
                allocated_gpu_hours=(seconds.allocated / HOUR).quantize(HOURS),
                pue=site.pue,
                power_price_per_kwh=power_price,
                opex_per_month=opex,
                revenue=revenue_total,
            )
        )
        warnings = [
            f"fx_rate_missing: {amount:f} {key.split(':')[1]} of {key.split(':')[0]} "
            f"not converted to {asset.currency}"
            for key, amount in sorted(convert.missing.items())
        ]
        detail = {
            "documents": sorted(documents),
            "by_kind": {kind: f"{amount:.2f}" for kind, amount in sorted(by_kind.items())},
            "by_currency": {cur: f"{amount:.2f}" for cur, amount in sorted(by_currency.items())},
            "conversions": [
                {"what": what, **conversion.as_json()} for what, conversion in convert.conversions
            ],
        }
        details.append((detail, warnings))
    figures = payback.asset_months(asset, facts)
    months = [
        AssetMonth(
            node_id=node.pk,
            month=month.month,
            month_of_life=index,
            currency=asset.currency,
            capex=asset.capex,
            hours_in_month=fact.hours_in_month,
            in_service_hours=fact.in_service_hours,
            available_gpu_hours=fact.available_gpu_hours,
            allocated_gpu_hours=fact.allocated_gpu_hours,
            utilization=month.utilization.value,
            energy_kwh=month.energy_kwh,
            energy_cost=month.energy_cost,
            opex=month.opex,
            depreciation=month.depreciation,
            revenue=month.revenue,
            net_cash_flow=month.net_cash_flow,
            cumulative_net_cash_flow=month.cumulative_net_cash_flow,
            book_value=month.book_value,
            revenue_detail=detail,
            warnings=warnings,
            computed_at=computed_at,
        )
        for index, (fact, month, (detail, warnings)) in enumerate(
            zip(facts, figures, details, strict=True), 1
        )
    ]
    summary = payback.payback_summary(asset, facts, figures)
    return NodeMonths(
        months=months,
        payback=AssetPayback(
            node_id=node.pk,
            currency=asset.currency,
            capex=asset.capex,
            months_of_life=summary.months_of_life,
            cumulative_net_cash_flow=summary.cumulative_net_cash_flow,
            paid_back_in_month=summary.paid_back_in_month,
            paid_back_on=summary.paid_back_on,
            projected_payback_months=summary.projected_months.value,
            projection_reason=summary.projected_months.reason,
            roi_to_date=summary.roi_to_date.value,
            revenue_per_gpu_hour=summary.revenue_per_gpu_hour.value,
            revenue_per_gpu_hour_reason=summary.revenue_per_gpu_hour.reason,
            break_even_rate_per_gpu_hour=summary.break_even_rate_per_gpu_hour.value,
            break_even_reason=summary.break_even_rate_per_gpu_hour.reason,
            trailing_utilization=summary.trailing_utilization.value,
            book_value=summary.book_value,
            computed_at=computed_at,
        ),
    )


MONTH_FIELDS = [
    f.name for f in AssetMonth._meta.concrete_fields if f.name not in {"id", "node", "month"}
]
PAYBACK_FIELDS = [
    f.name for f in AssetPayback._meta.concrete_fields if f.name not in {"id", "node"}
]


def _write(results: Iterable[NodeMonths], node_ids: Sequence[int]) -> int:
    """Replace the nodes' rows with the new ones: upsert, then drop months no longer computed."""
    months = [row for result in results for row in result.months]
    paybacks = [result.payback for result in results]
    for start in range(0, len(months), WRITE_BATCH):
        AssetMonth.objects.bulk_create(
            months[start : start + WRITE_BATCH],
            update_conflicts=True,
            unique_fields=["node", "month"],
            update_fields=MONTH_FIELDS,
        )
    AssetPayback.objects.bulk_create(
        paybacks, update_conflicts=True, unique_fields=["node"], update_fields=PAYBACK_FIELDS
    )
    kept = {(row.node_id, row.month) for row in months}
    stale = [
        pk
        for pk, node_id, month in AssetMonth.objects.filter(node_id__in=node_ids).values_list(
            "pk", "node_id", "month"
        )
        if (node_id, month) not in kept
    ]
    AssetMonth.objects.filter(pk__in=stale).delete()
    AssetPayback.objects.filter(node_id__in=node_ids).exclude(
        node_id__in=[p.node_id for p in paybacks]
    ).delete()
    return len(months)


def asset_economics_refresh(
    *, now: datetime | None = None, node_ids: Sequence[int] | None = None
) -> tuple[int, int, list[dict[str, str]]]:
    """Recompute every month and the payback of the nodes (all by default), in one transaction.

    Returns (nodes, months, unattributed revenue lines).
    """
    now = now or timezone.now()
    nodes = Node.objects.select_related("site").order_by("pk")
    if node_ids is not None:
        nodes = nodes.filter(pk__in=node_ids)
    node_list = list(nodes)
    ids = [node.pk for node in node_list]
    seconds = gpu_seconds(node_ids=ids, now=now, step="1 month")
    by_node: dict[int, dict[date, GpuSeconds]] = defaultdict(dict)
    for (node_id, bucket), value in seconds.items():
        by_node[node_id][bucket.astimezone(UTC).date()] = value
    attribution = revenue_attribute()
    revenue: dict[int, dict[date, list[RevenuePiece]]] = defaultdict(dict)
    for (node_id, month), pieces in attribution.pieces.items():
        revenue[node_id][month] = pieces
    in_run = set(ids)
    for (node_id, month), pieces in attribution.pieces.items():
        if node_id in in_run and month not in by_node.get(node_id, {}):
            # Revenue in a month the node was not in service (e.g. billed before acquisition
            # was recorded) is not dropped: it is reported with the run.
            attribution.unattributed.extend(
                {
                    "document": piece.document,
                    "kind": piece.kind,
                    "amount": f"{piece.amount:.2f}",
                    "currency": piece.currency,
                    "reason": f"node {node_id} not in service in {month:%Y-%m}",
                }
                for piece in pieces
            )
    fx = FxTable.load()
    results = [
        node_months(node, by_node.get(node.pk, {}), revenue.get(node.pk, {}), fx, now)
        for node in node_list
    ]
    with transaction.atomic():
        written = _write(results, ids)
    return len(node_list), written, attribution.unattributed
