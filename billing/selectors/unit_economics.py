"""Unit economics per SLA offering or per pool of nodes, per week or month, read on demand.

Cost is the total cost of ownership of the nodes (depreciation + energy + opex, from the
nightly asset months, prorated to the period and converted to the scope's currency). A node
that serves several SLA offerings shares its cost equally among them. Successful requests and
tokens come from the hourly usage rollups; latency percentiles per hour are computed exactly
from the usage events. Training and inference are kept apart: an offering serves inference;
a pool's GPU-hours are split by the workload tag of the leases that used them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection

from accounts.models import Organization
from billing import payback
from billing.fx import FxTable
from billing.models import AssetMonth, UsageRollup
from billing.selectors.gpu_hours import HOUR, HOURS, gpu_seconds
from billing.selectors.revenue import next_month
from core.errors import NotFound, ValidationFailed
from core.money import round_money
from inventory.models import Node, Site
from leasing.models import SlaOffering, SlaSubscription

ZERO = Decimal("0")
PERIODS = ("week", "month")
MAX_PERIODS = 60
DEFAULT_SPAN = timedelta(days=90)

# Exact p95 / p99 of time-to-first-token and end-to-end latency per hour, over the successful
# requests of the given contracts.
HOURLY_LATENCY_SQL = """
SELECT date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS hour,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY ttft_ms),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY ttft_ms),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY e2e_ms),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY e2e_ms)
FROM billing_usageevent
WHERE contract_id = ANY(%(contracts)s) AND status = 'success'
  AND occurred_at >= %(start)s AND occurred_at < %(end)s
GROUP BY 1
ORDER BY 1
"""

CSV_FIELDS = [
    "scope",
    "scope_id",
    "scope_name",
    "period",
    "period_start",
    "period_end",
    "currency",
    "total_cost",
    "depreciation",
    "energy_cost",
    "opex",
    "available_gpu_hours",
    "allocated_gpu_hours",
    "utilization_avg",
    "utilization_peak",
    "requests_total",
    "requests_successful",
    "requests_failed",
    "tokens_successful",
    "cost_per_successful_request",
    "cost_per_million_successful_tokens",
    "failed_request_share",
    "cost_of_failed_requests",
    "training_gpu_hours",
    "inference_gpu_hours",
    "unspecified_gpu_hours",
]


@dataclass(frozen=True, slots=True)
class Scope:
    """What is measured: an SLA offering, or a pool (one GPU model at one site)."""

    kind: str
    key: str
    name: str
    currency: str
    # node id -> share of the node's cost that belongs to the scope
    node_shares: dict[int, Decimal]
    # token contracts whose usage the scope serves -> share of their usage
    contract_shares: dict[int, Decimal]
    # the token throughput the scope promises, for throughput utilization (offerings)
    committed_tokens_per_s: int | None


@dataclass(frozen=True, slots=True)
class HourStats:
    """One hour of a period: traffic, throughput utilization and latency percentiles."""

    hour: datetime
    requests_total: int
    requests_successful: int
    tokens_successful: int
    utilization: Decimal | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None


def _text(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:f}"


def _ratio_json(ratio: payback.Ratio) -> dict[str, str | None]:
    return {"value": _text(ratio.value), "reason": ratio.reason or None}


@dataclass(slots=True)
class UnitEconomicsPeriod:
    """One week or month of one scope: what it cost and what it delivered."""

    scope: Scope
    period: str
    start: date
    end: date
    depreciation: Decimal
    energy_cost: Decimal
    opex: Decimal
    available_gpu_hours: Decimal
    allocated_gpu_hours: Decimal
    utilization_avg: payback.Ratio
    utilization_peak: Decimal | None
    costs: payback.UnitCosts
    gpu_hours_by_workload: dict[str, Decimal]
    hourly: list[HourStats]
    conversions: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def total_cost(self) -> Decimal:
        """Depreciation + energy + opex of the scope's share of its nodes."""
        return self.depreciation + self.energy_cost + self.opex

    def as_json(self) -> dict[str, Any]:
        """The period as the API shows it: amounts as strings, nulls with their reasons."""
        costs = self.costs
        return {
            "scope": self.scope.kind,
            "scope_id": self.scope.key,
            "scope_name": self.scope.name,
            "period": self.period,
            "period_start": self.start.isoformat(),
            "period_end": self.end.isoformat(),
            "currency": self.scope.currency,
            "total_cost": f"{self.total_cost:f}",
            "cost_breakdown": {
                "depreciation": f"{self.depreciation:f}",
                "energy": f"{self.energy_cost:f}",
                "opex": f"{self.opex:f}",
            },
            "available_gpu_hours": f"{self.available_gpu_hours:f}",
            "allocated_gpu_hours": f"{self.allocated_gpu_hours:f}",
            "utilization_avg": _ratio_json(self.utilization_avg),
            "utilization_peak": _text(self.utilization_peak),
            "requests_total": costs.requests_total,
            "requests_successful": costs.requests_successful,
            "requests_failed": costs.requests_total - costs.requests_successful,
            "tokens_successful": costs.tokens_successful,
            "cost_per_successful_request": _ratio_json(costs.cost_per_successful_request),
            "cost_per_million_successful_tokens": _ratio_json(
                costs.cost_per_million_successful_tokens
            ),
            "failed_request_share": _ratio_json(costs.failed_request_share),
            "cost_of_failed_requests": _text(costs.cost_of_failed_requests),
            "gpu_hours_by_workload": {
                tag: f"{hours:f}" for tag, hours in sorted(self.gpu_hours_by_workload.items())
            },
            "hourly": [
                {
                    "hour": stats.hour.isoformat(),
                    "requests_total": stats.requests_total,
                    "requests_successful": stats.requests_successful,
                    "tokens_successful": stats.tokens_successful,
                    "utilization": _text(stats.utilization),
                    "ttft_p95_ms": stats.ttft_p95_ms,
                    "ttft_p99_ms": stats.ttft_p99_ms,
                    "e2e_p95_ms": stats.e2e_p95_ms,
                    "e2e_p99_ms": stats.e2e_p99_ms,
                }
                for stats in self.hourly
            ],
            "conversions": self.conversions,
            "warnings": self.warnings,
        }

    def as_row(self) -> dict[str, Any]:
        """The period as one flat CSV row (the hourly series stays in the JSON answer)."""
        data = self.as_json()
        row = {name: data.get(name) for name in CSV_FIELDS}
        row.update(
            depreciation=data["cost_breakdown"]["depreciation"],
            energy_cost=data["cost_breakdown"]["energy"],
            opex=data["cost_breakdown"]["opex"],
            utilization_avg=data["utilization_avg"]["value"],
            cost_per_successful_request=data["cost_per_successful_request"]["value"],
            cost_per_million_successful_tokens=data["cost_per_million_successful_tokens"]["value"],
            failed_request_share=data["failed_request_share"]["value"],
        )
        for tag in ("training", "inference", "unspecified"):
            row[f"{tag}_gpu_hours"] = data["gpu_hours_by_workload"].get(tag, "0")
        return row


# ------------------------------------------------------------------ scopes


def _owned(caller: Organization, provider_id: int) -> bool:
    return caller.is_operator or caller.pk == provider_id


def offering_scope(*, caller: Organization, offering_id: int) -> Scope:
    """An SLA offering of the caller's (operators: any); 404 otherwise."""
    offering = SlaOffering.objects.filter(pk=offering_id).first()
    if offering is None or not _owned(caller, offering.provider_id):
        raise NotFound(f"SLA offering {offering_id} not found.", code="offering_not_found")
    node_ids = list(offering.nodes.values_list("pk", flat=True))
    served_by: dict[int, int] = defaultdict(int)
    for node_id in SlaOffering.nodes.through.objects.filter(node_id__in=node_ids).values_list(
        "node_id", flat=True
    ):
        served_by[node_id] += 1
    contracts = SlaSubscription.objects.filter(offering=offering).values_list(
        "contract_id", flat=True
    )
    return Scope(
        kind="offering",
        key=str(offering.pk),
        name=offering.served_model_name,
        currency=offering.currency,
        node_shares={node_id: Decimal(1) / served_by[node_id] for node_id in node_ids},
        contract_shares={contract_id: Decimal(1) for contract_id in contracts},
        committed_tokens_per_s=offering.committed_tokens_per_s,
    )


def pool_scope(*, caller: Organization, site_id: int, gpu_model_slug: str) -> Scope:
    """The caller's nodes of one GPU model at one site, and the token usage they serve.

    An SLA offering's usage counts for the pool by the pool's share of the offering's GPUs.
    """
    site = Site.objects.filter(pk=site_id).first()
    if site is None or not _owned(caller, site.organization_id):
        raise NotFound(f"Site {site_id} not found.", code="site_not_found")
    nodes = {
        pk: gpus
        for pk, gpus in Node.objects.filter(site=site, gpu_model__slug=gpu_model_slug).values_list(
            "pk", "gpu_count"
        )
    }
    if not nodes:
        raise NotFound(f"Site {site_id} has no {gpu_model_slug} nodes.", code="pool_not_found")
    touching = set(SlaOffering.objects.filter(nodes__in=list(nodes)).values_list("pk", flat=True))
    offering_gpus: dict[int, Decimal] = defaultdict(Decimal)
    pool_gpus: dict[int, Decimal] = defaultdict(Decimal)
    for offering_id, node_id, gpus in SlaOffering.objects.filter(pk__in=touching).values_list(
        "pk", "nodes__id", "nodes__gpu_count"
    ):
        offering_gpus[offering_id] += Decimal(gpus)
        if node_id in nodes:
            pool_gpus[offering_id] += Decimal(gpus)
    contract_shares = {
        contract_id: pool_gpus[offering_id] / offering_gpus[offering_id]
        for contract_id, offering_id in SlaSubscription.objects.filter(
            offering_id__in=list(offering_gpus)
        ).values_list("contract_id", "offering_id")
    }
    return Scope(
        kind="pool",
        key=f"{site.pk}:{gpu_model_slug}",
        name=f"{gpu_model_slug} at {site.name}",
        currency=Node.objects.filter(pk__in=list(nodes))
        .values_list("capex_currency", flat=True)
        .first()
        or "USD",
        node_shares={node_id: Decimal(1) for node_id in nodes},
        contract_shares=contract_shares,
        committed_tokens_per_s=None,
    )


# ------------------------------------------------------------------ periods


def periods_between(period: str, start: date, end: date) -> list[tuple[date, date]]:
    """Calendar months or ISO weeks (Monday first) touching [start, end], clipped to it."""

    def step(day: date) -> date:
        return next_month(day) if period == "month" else day + timedelta(days=7)

    if period == "month":
        first = date(start.year, start.month, 1)
    else:
        first = start - timedelta(days=start.weekday())
    periods = []
    cursor = first
    while cursor <= end:
        following = step(cursor)
        periods.append((max(cursor, start), min(following, end + timedelta(days=1))))
        cursor = following
    return periods


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


# ------------------------------------------------------------------ the figures


def _costs(
    scope: Scope,
    start: datetime,
    end: datetime,
    fx: FxTable,
    conversions: list[dict[str, Any]],
    warnings: list[str],
) -> tuple[Decimal, Decimal, Decimal]:
    """The scope's share of its nodes' depreciation, energy and opex over [start, end)."""
    totals = [ZERO, ZERO, ZERO]
    months = AssetMonth.objects.filter(
        node_id__in=list(scope.node_shares),
        month__gte=date(start.year, start.month, 1),
        month__lt=end.date() + timedelta(days=1),
    ).values_list(
        "node_id",
        "month",
        "currency",
        "in_service_hours",
        "computed_at",
        "depreciation",
        "energy_cost",
        "opex",
    )
    by_currency: dict[str, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO, ZERO])
    for node_id, month, currency, in_service, computed_at, *amounts in months:
        month_start = _midnight(month)
        month_end = min(_midnight(next_month(month)), computed_at)
        overlap = (min(end, month_end) - max(start, month_start)).total_seconds()
        if overlap <= 0 or not in_service:
            continue
        share = min(Decimal(1), Decimal(overlap) / HOUR / in_service) * scope.node_shares[node_id]
        for index, amount in enumerate(amounts):
            by_currency[currency][index] += amount * share
    on = (end - timedelta(seconds=1)).date()
    for currency, amounts in by_currency.items():
        for index, (name, amount) in enumerate(
            zip(("depreciation", "energy", "opex"), amounts, strict=True)
        ):
            if currency == scope.currency or not amount:
                totals[index] += amount
                continue
            conversion = fx.convert(amount, currency, scope.currency, on)
            if conversion is None:
                warnings.append(
                    f"fx_rate_missing: {amount:.2f} {currency} of {name} not converted to "
                    f"{scope.currency}"
                )
                continue
            conversions.append({"what": name, **conversion.as_json()})
            totals[index] += conversion.converted
    depreciation, energy, opex = (round_money(total, scope.currency) for total in totals)
    return depreciation, energy, opex


def _usage(
    scope: Scope, start: datetime, end: datetime
) -> tuple[int, int, int, dict[datetime, tuple[int, int, int]]]:
    """Requests (all, successful) and successful tokens in the period, and per hour."""
    if not scope.contract_shares:
        return 0, 0, 0, {}
    rows = (
        UsageRollup.objects.filter(
            contract_id__in=list(scope.contract_shares), hour__gte=start, hour__lt=end
        )
        .values_list(
            "contract_id",
            "hour",
            "requests_total",
            "requests_success",
            "input_tokens_success",
            "output_tokens_success",
        )
        .order_by("hour")
    )
    hourly: dict[datetime, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO, ZERO])
    for contract_id, hour, total, success, input_tokens, output_tokens in rows:
        share = scope.contract_shares[contract_id]
        hourly[hour][0] += total * share
        hourly[hour][1] += success * share
        hourly[hour][2] += (input_tokens + output_tokens) * share
    per_hour = {
        hour: (round(values[0]), round(values[1]), round(values[2]))
        for hour, values in hourly.items()
    }
    return (
        sum(values[0] for values in per_hour.values()),
        sum(values[1] for values in per_hour.values()),
        sum(values[2] for values in per_hour.values()),
        per_hour,
    )


def _latency(scope: Scope, start: datetime, end: datetime) -> dict[datetime, tuple[Any, ...]]:
    if not scope.contract_shares:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            HOURLY_LATENCY_SQL,
            {"contracts": list(scope.contract_shares), "start": start, "end": end},
        )
        return {row[0]: tuple(row[1:]) for row in cursor.fetchall()}


def _workload_hours(scope: Scope, start: datetime, end: datetime) -> dict[str, Decimal]:
    """GPU-hours of lease allocations on the scope's nodes in the period, by workload tag."""
    sql = """
        SELECT l.workload,
               sum(EXTRACT(EPOCH FROM upper(a.period * r) - lower(a.period * r)))
        FROM leasing_allocation a
        JOIN leasing_lease l ON l.id = a.lease_id
        CROSS JOIN (SELECT tstzrange(%(start)s, %(end)s, '[)') AS r) bounds
        WHERE a.node_id = ANY(%(nodes)s) AND a.released_at IS NULL AND a.period && r
        GROUP BY l.workload
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"start": start, "end": end, "nodes": list(scope.node_shares)})
        return {
            workload: (Decimal(seconds) / HOUR).quantize(HOURS)
            for workload, seconds in cursor.fetchall()
        }


def period_figures(
    scope: Scope, period: str, start: date, end: date, *, now: datetime, fx: FxTable
) -> UnitEconomicsPeriod:
    """Cost, traffic, utilization and latency of one scope over [start, end)."""
    window_start = _midnight(start)
    window_end = min(_midnight(end), now)
    conversions: list[dict[str, Any]] = []
    warnings: list[str] = []
    if window_end <= window_start:
        depreciation = energy = opex = ZERO
        buckets: dict[Any, Any] = {}
    else:
        depreciation, energy, opex = _costs(
            scope, window_start, window_end, fx, conversions, warnings
        )
        buckets = gpu_seconds(
            node_ids=list(scope.node_shares),
            now=now,
            step="1 hour",
            start=window_start,
            end=window_end,
        )
    available_by_hour: dict[datetime, Decimal] = defaultdict(Decimal)
    allocated_by_hour: dict[datetime, Decimal] = defaultdict(Decimal)
    for (node_id, hour), seconds in buckets.items():
        share = scope.node_shares[node_id]
        available_by_hour[hour] += seconds.available * share
        allocated_by_hour[hour] += seconds.allocated * share
    available = sum(available_by_hour.values(), ZERO)
    allocated = sum(allocated_by_hour.values(), ZERO)
    requests, successful, tokens, usage = (
        _usage(scope, window_start, window_end) if buckets else (0, 0, 0, {})
    )
    latency = _latency(scope, window_start, window_end) if usage else {}
    total_cost = depreciation + energy + opex
    committed = scope.committed_tokens_per_s
    hourly = []
    hours = sorted(set(usage) | set(latency))
    for hour in hours:
        total, ok, hour_tokens = usage.get(hour, (0, 0, 0))
        hourly.append(
            HourStats(
                hour=hour,
                requests_total=total,
                requests_successful=ok,
                tokens_successful=hour_tokens,
                utilization=(
                    (Decimal(hour_tokens) / (committed * HOUR)).quantize(payback.FRACTION)
                    if committed
                    else None
                ),
                ttft_p95_ms=latency.get(hour, (None,) * 4)[0],
                ttft_p99_ms=latency.get(hour, (None,) * 4)[1],
                e2e_p95_ms=latency.get(hour, (None,) * 4)[2],
                e2e_p99_ms=latency.get(hour, (None,) * 4)[3],
            )
        )
    if committed:
        # An offering's utilization is its delivered throughput against its commitment.
        elapsed_hours = Decimal(len({hour for _, hour in buckets}))
        utilization_avg = payback.ratio(
            Decimal(tokens),
            committed * HOUR * elapsed_hours,
            reason="no_hours_in_service",
            places=payback.FRACTION,
        )
        peak = max((stats.utilization for stats in hourly if stats.utilization), default=None)
    else:
        utilization_avg = payback.ratio(
            allocated, available, reason="no_available_gpu_hours", places=payback.FRACTION
        )
        peak = max(
            (
                (allocated_by_hour[hour] / value).quantize(payback.FRACTION)
                for hour, value in available_by_hour.items()
                if value
            ),
            default=None,
        )
    by_workload = (
        {"inference": (allocated / HOUR).quantize(HOURS)}
        if scope.kind == "offering"
        else _workload_hours(scope, window_start, window_end)
        if buckets
        else {}
    )
    return UnitEconomicsPeriod(
        scope=scope,
        period=period,
        start=start,
        end=end,
        depreciation=depreciation,
        energy_cost=energy,
        opex=opex,
        available_gpu_hours=(available / HOUR).quantize(HOURS),
        allocated_gpu_hours=(allocated / HOUR).quantize(HOURS),
        utilization_avg=utilization_avg,
        utilization_peak=peak,
        costs=payback.unit_costs(
            total_cost=total_cost,
            currency=scope.currency,
            requests_total=requests,
            requests_successful=successful,
            tokens_successful=tokens,
        ),
        gpu_hours_by_workload=by_workload,
        hourly=hourly,
        conversions=conversions,
        warnings=warnings,
    )


def unit_economics(
    *,
    caller_org: Organization,
    offering_id: int | None,
    pool: tuple[int, str] | None,
    period: str,
    start: date | None,
    end: date | None,
    now: datetime,
) -> list[UnitEconomicsPeriod]:
    """Every week or month of the scope between `start` and `end` (the last 90 days by default).

    Errors: 400 scope_required / invalid_period / invalid_range / range_too_long;
    404 offering_not_found / site_not_found / pool_not_found.
    """
    if (offering_id is None) == (pool is None):
        raise ValidationFailed("Give exactly one of `offering` or `pool`.", code="scope_required")
    if period not in PERIODS:
        raise ValidationFailed(
            f"`period` is one of {', '.join(PERIODS)}.",
            code="invalid_period",
            detail={"field": "period"},
        )
    end = end or now.date()
    start = start or end - DEFAULT_SPAN
    if start > end:
        raise ValidationFailed(
            "`from` is after `to`.", code="invalid_range", detail={"from": start, "to": end}
        )
    periods = periods_between(period, start, end)
    if len(periods) > MAX_PERIODS:
        raise ValidationFailed(
            f"At most {MAX_PERIODS} periods per request; narrow `from` / `to`.",
            code="range_too_long",
            detail={"periods": len(periods)},
        )
    scope = (
        offering_scope(caller=caller_org, offering_id=offering_id)
        if offering_id is not None
        else pool_scope(caller=caller_org, site_id=pool[0], gpu_model_slug=pool[1])  # type: ignore[index]
    )
    fx = FxTable.load()
    return [
        period_figures(scope, period, period_start, period_end, now=now, fx=fx)
        for period_start, period_end in periods
    ]
