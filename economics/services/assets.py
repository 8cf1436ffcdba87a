"""Asset months and payback: every node's months in its capex currency, and its standing.

Idempotent and incremental: triggers mark the first month of a node whose SQL inputs changed
(allocations, outages, the node's and site's costs, its retirement: the dirty set, see
`selectors/dirty.py`), and each month carries a digest of the revenue placed on it and the FX
rates it converts with and of its span of service. A run recomputes a node from the earliest
month either names (later months follow: cumulative figures carry over), continues
from the stored months before it, and writes only rows whose values changed; so late usage, a
credit note or a corrected FX rate still shows up the next night without scanning every input.
`full=True` recomputes every month (operators' "recompute now").
"""

from __future__ import annotations

import calendar
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from core.money import round_money
from core.rows import large_statements
from economics import payback
from economics.fx import Conversion, FxTable
from economics.models import AssetMonth, AssetPayback
from economics.resale import MARKETPLACE_FEE, PROVIDER_SHARE, RESALE_ROLES, ResaleSplit
from economics.selectors.dirty import dirty_months_take, revenue_fingerprints, service_months
from economics.selectors.earlier_months import EarlierMonths, earlier_months
from economics.selectors.fingerprints import stored_fingerprints
from economics.selectors.gpu_hours import HOUR, HOURS, GpuSeconds, gpu_seconds
from economics.selectors.revenue import OWN, RevenuePiece, next_month, revenue_attribute
from economics.services.asset_rows import asset_rows_write
from inventory.models import Node

ZERO = Decimal("0")


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


@dataclass(frozen=True, slots=True)
class Resale:
    """A month's resold GPU-hours and what their buyers paid, split, in the asset's currency."""

    gpu_hours: Decimal
    split: ResaleSplit


def _resale_of(
    pieces: Sequence[RevenuePiece], convert: _Converter, currency: str
) -> tuple[ResaleSplit, dict[str, Any]]:
    """The buyers' payments placed on a month, converted and rounded per part (the fee and the
    provider's share each once; the seller's part is the rest), and their explanation."""
    parts: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    documents: set[str] = set()
    for piece in pieces:
        if piece.role in RESALE_ROLES:
            parts[piece.role][piece.currency] += piece.amount
            documents.add(piece.document)
    if not documents:
        return ResaleSplit(ZERO, ZERO, ZERO), {}
    converted = {
        role: sum((convert(amount, cur, role) for cur, amount in by_cur.items()), ZERO)
        for role, by_cur in parts.items()
    }
    gross = round_money(sum(converted.values(), ZERO), currency)
    provider = round_money(converted.get(PROVIDER_SHARE, ZERO), currency)
    fee = round_money(converted.get(MARKETPLACE_FEE, ZERO), currency)
    detail = {
        "resale": {
            "documents": sorted(documents),
            "by_currency": {
                cur: {
                    role.removeprefix("resale_"): f"{parts[role][cur]:.2f}" for role in RESALE_ROLES
                }
                for cur in sorted({cur for by_cur in parts.values() for cur in by_cur})
            },
        }
    }
    return ResaleSplit(provider, gross - provider - fee, fee), detail


def node_months(
    node: Node,
    buckets: dict[date, GpuSeconds],
    revenue: dict[date, list[RevenuePiece]],
    fx: FxTable,
    computed_at: datetime,
    *,
    earlier: EarlierMonths | None = None,
    fingerprints: dict[date, str] | None = None,
) -> NodeMonths:
    """One node's months in its capex currency, its payback, with conversions and warnings.

    `buckets` may start after the node's first month: `earlier` sums up the months before, as
    stored.
    """
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
    resales: list[Resale] = []
    for month, seconds in sorted(buckets.items()):
        convert = _Converter(fx, asset.currency, month)
        pieces = revenue.get(month, [])
        by_kind: dict[str, Decimal] = defaultdict(Decimal)
        by_currency: dict[str, Decimal] = defaultdict(Decimal)
        documents: set[str] = set()
        # The provider's revenue: its own contracts' pieces and its share of buyers' payments.
        for piece in pieces:
            if piece.role not in (OWN, PROVIDER_SHARE):
                continue
            by_kind[piece.kind] += piece.amount
            by_currency[piece.currency] += piece.amount
            documents.add(piece.document)
        revenue_total = sum(
            (convert(amount, currency, "revenue") for currency, amount in by_currency.items()),
            ZERO,
        )
        resale, resale_detail = _resale_of(pieces, convert, asset.currency)
        resales.append(Resale(gpu_hours=(seconds.resold / HOUR).quantize(HOURS), split=resale))
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
            **resale_detail,
            "conversions": [
                {"what": what, **conversion.as_json()} for what, conversion in convert.conversions
            ],
        }
        details.append((detail, warnings))
    figures = payback.asset_months(asset, facts, start=earlier.progress if earlier else None)
    months_before = earlier.earlier.months if earlier else 0
    fingerprints = fingerprints or {}
    months = [
        AssetMonth(
            node_id=node.pk,
            month=month.month,
            month_of_life=months_before + index,
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
            resold_gpu_hours=resale.gpu_hours,
            resale_revenue=resale.split.total,
            resale_provider_share=resale.split.provider_share,
            reseller_proceeds=resale.split.seller_proceeds,
            marketplace_fee=resale.split.marketplace_fee,
            revenue_detail=detail,
            warnings=warnings,
            inputs_fingerprint=fingerprints.get(month.month, ""),
            computed_at=computed_at,
        )
        for index, (fact, month, (detail, warnings), resale) in enumerate(
            zip(facts, figures, details, resales, strict=True), 1
        )
    ]
    summary = payback.payback_summary(
        asset, facts, figures, earlier=earlier.earlier if earlier else None
    )
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


@dataclass(slots=True)
class Plan:
    """Which nodes a run recomputes, and from which month (None: only the payback)."""

    months: dict[int, list[date]]
    start: dict[int, date | None]
    stale: list[tuple[int, date]]


def _plan(
    node_ids: Sequence[int],
    months: dict[int, list[date]],
    fingerprints: dict[tuple[int, date], str],
    *,
    every_node: bool,
    full: bool,
) -> Plan:
    """Each node from its earliest month that the dirty set or a changed digest (span of
    service, revenue, FX) names; a node nothing names is left as it is."""
    dirty = dirty_months_take(node_ids=None if every_node else node_ids)
    stored = stored_fingerprints(node_ids=node_ids)
    with_payback = set(
        AssetPayback.objects.filter(node_id__in=node_ids).values_list("node_id", flat=True)
    )
    start: dict[int, date | None] = {}
    stale: list[tuple[int, date]] = []
    for node_id in node_ids:
        computed, kept = months.get(node_id, []), stored.get(node_id, {})
        gone = sorted(set(kept) - set(computed))
        stale.extend((node_id, month) for month in gone)
        if not computed:
            if gone or full or node_id not in with_payback:
                start[node_id] = None
            continue
        firsts = []
        if full or node_id not in with_payback:
            firsts.append(computed[0])
        if node_id in dirty:
            firsts.append(max(dirty[node_id], computed[0]))
        changed = next((m for m in computed if kept.get(m) != fingerprints[node_id, m]), None)
        if changed is not None:
            firsts.append(changed)
        if gone:
            # Months dropped (e.g. `now` earlier than the last run's): the payback is redone.
            firsts.append(computed[-1])
        if firsts:
            start[node_id] = min(firsts)
    return Plan(months=months, start=start, stale=stale)


def _buckets(plan: Plan, now: datetime) -> dict[int, dict[date, GpuSeconds]]:
    """GPU-seconds of the months to recompute: one query per distinct first month."""
    by_start: dict[date, list[int]] = defaultdict(list)
    for node_id, first in plan.start.items():
        if first is not None:
            by_start[first].append(node_id)
    by_node: dict[int, dict[date, GpuSeconds]] = defaultdict(dict)
    for first, ids in sorted(by_start.items()):
        begin = datetime(first.year, first.month, 1, tzinfo=UTC)
        seconds = gpu_seconds(node_ids=ids, now=now, step="1 month", start=begin)
        for (node_id, bucket), value in seconds.items():
            by_node[node_id][bucket.astimezone(UTC).date()] = value
    return by_node


def asset_economics_refresh(
    *, now: datetime | None = None, node_ids: Sequence[int] | None = None, full: bool = False
) -> tuple[int, int, list[dict[str, str]]]:
    """Bring every month and the payback of the nodes (all by default) up to date, in one
    transaction: recompute what changed (everything with `full`), write what differs.

    Returns (nodes, months written, unattributed revenue lines).
    """
    now = now or timezone.now()
    # One transaction; its statements are few and large (core.rows.large_statements).
    with large_statements():
        return _refresh(now=now, node_ids=node_ids, full=full)


def _refresh(
    *, now: datetime, node_ids: Sequence[int] | None, full: bool
) -> tuple[int, int, list[dict[str, str]]]:
    nodes = Node.objects.select_related("site").order_by("pk")
    if node_ids is not None:
        nodes = nodes.filter(pk__in=node_ids)
    node_list = list(nodes)
    ids = [node.pk for node in node_list]
    attribution = revenue_attribute()
    months, spans = service_months(node_ids=ids, now=now)
    fingerprints = revenue_fingerprints(
        nodes=node_list, months=months, spans=spans, revenue=attribution.pieces
    )
    in_run = set(ids)
    for (node_id, month), pieces in attribution.pieces.items():
        if node_id in in_run and (node_id, month) not in fingerprints:
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
    plan = _plan(ids, months, fingerprints, every_node=node_ids is None, full=full)
    buckets = _buckets(plan, now)
    first = {node_id: months[node_id][0] for node_id, start in plan.start.items() if start}
    prior = earlier_months(
        since=first, before={node_id: start for node_id, start in plan.start.items() if start}
    )
    fx = FxTable.load()
    results = []
    for node in node_list:
        if node.pk not in plan.start:
            continue
        revenue = {
            month: attribution.pieces[node.pk, month]
            for month in buckets.get(node.pk, {})
            if (node.pk, month) in attribution.pieces
        }
        own = {m: fingerprints[node.pk, m] for m in months.get(node.pk, [])}
        results.append(
            node_months(
                node,
                buckets.get(node.pk, {}),
                revenue,
                fx,
                now,
                earlier=prior.get(node.pk),
                fingerprints=own,
            )
        )
    written = asset_rows_write(
        months=(row for result in results for row in result.months),
        paybacks=(result.payback for result in results),
        stale=plan.stale,
    )
    return len(node_list), written, attribution.unattributed
