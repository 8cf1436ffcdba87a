"""Unit economics per SLA offering or per pool of nodes, per week or month, read on demand.

Cost is the total cost of ownership of the nodes (depreciation + energy + opex, from the
nightly asset months, prorated to the period and converted to the scope's currency). A node
that serves several SLA offerings shares its cost equally among them. Successful requests and
tokens come from the hourly usage rollups; latency percentiles per hour are computed exactly
from the usage events. Training and inference are kept apart: an offering serves inference;
a pool's GPU-hours are split by the workload tag of the leases that used them.

Online and batch requests are costed apart (`by_mode`): a mode's share of the cost is its share
of the tokens the GPUs computed — input not served from the prompt cache, plus output, of every
request that reached them — so cache hits and failed requests show in each mode's unit costs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from accounts.models import Organization
from core.errors import ValidationFailed
from core.money import round_money
from economics import payback
from economics.fx import FxTable
from economics.selectors.gpu_hours import HOUR, HOURS, gpu_seconds
from economics.selectors.revenue import next_month
from economics.selectors.scopes import Scope, offering_scope, pool_scope
from economics.selectors.unit_facts import (
    ModeUsage,
    midnight,
    scope_costs,
    scope_latency,
    scope_mode_usage,
    scope_usage,
    scope_workload_hours,
)

ZERO = Decimal("0")
PERIODS = ("week", "month")
MAX_PERIODS = 60
DEFAULT_SPAN = timedelta(days=90)

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
    "online_cost_per_successful_request",
    "online_cost_per_million_successful_tokens",
    "batch_cost_per_successful_request",
    "batch_cost_per_million_successful_tokens",
]
MODES = ("online", "batch")


@dataclass(frozen=True, slots=True)
class ModeCosts:
    """One mode's part of a period: its share of the computed tokens, its cost and unit costs."""

    compute_share: payback.Ratio
    costs: payback.UnitCosts

    def as_json(self) -> dict[str, Any]:
        """The mode as the API shows it."""
        costs = self.costs
        return {
            "compute_share": _ratio_json(self.compute_share),
            "total_cost": f"{costs.total_cost:f}",
            "requests_total": costs.requests_total,
            "requests_successful": costs.requests_successful,
            "tokens_successful": costs.tokens_successful,
            "cost_per_successful_request": _ratio_json(costs.cost_per_successful_request),
            "cost_per_million_successful_tokens": _ratio_json(
                costs.cost_per_million_successful_tokens
            ),
        }


def mode_costs(
    total_cost: Decimal, currency: str, usage: dict[str, ModeUsage]
) -> dict[str, ModeCosts]:
    """Split the period's cost over the modes by computed tokens (the last mode takes the
    rounding remainder, so the parts add up to the cost); each with its unit costs."""
    computed = sum((Decimal(mode.tokens_computed) for mode in usage.values()), ZERO)
    result: dict[str, ModeCosts] = {}
    left = total_cost
    present = [mode for mode in MODES if mode in usage]
    for index, mode in enumerate(present):
        facts = usage[mode]
        share = payback.ratio(
            Decimal(facts.tokens_computed),
            computed,
            reason="no_computed_tokens",
            places=payback.FRACTION,
        )
        if index == len(present) - 1:
            cost = left
        else:
            cost = (
                round_money(total_cost * facts.tokens_computed / computed, currency)
                if computed
                else ZERO
            )
        left -= cost
        result[mode] = ModeCosts(
            compute_share=share,
            costs=payback.unit_costs(
                total_cost=cost,
                currency=currency,
                requests_total=facts.requests_total,
                requests_successful=facts.requests_successful,
                tokens_successful=facts.tokens_successful,
            ),
        )
    return result


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
    by_mode: dict[str, ModeCosts] = field(default_factory=dict)
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
            "by_mode": {mode: costs.as_json() for mode, costs in self.by_mode.items()},
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
        for mode in MODES:
            figures = data["by_mode"].get(mode)
            for name in ("cost_per_successful_request", "cost_per_million_successful_tokens"):
                row[f"{mode}_{name}"] = figures[name]["value"] if figures else None
        return row


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


# ------------------------------------------------------------------ the figures


def period_figures(
    scope: Scope, period: str, start: date, end: date, *, now: datetime, fx: FxTable
) -> UnitEconomicsPeriod:
    """Cost, traffic, utilization and latency of one scope over [start, end)."""
    window_start = midnight(start)
    window_end = min(midnight(end), now)
    conversions: list[dict[str, Any]] = []
    warnings: list[str] = []
    if window_end <= window_start:
        depreciation = energy = opex = ZERO
        buckets: dict[Any, Any] = {}
    else:
        depreciation, energy, opex = scope_costs(
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
        scope_usage(scope, window_start, window_end) if buckets else (0, 0, 0, {})
    )
    latency = scope_latency(scope, window_start, window_end) if usage else {}
    modes = scope_mode_usage(scope, window_start, window_end) if usage else {}
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
        else scope_workload_hours(scope, window_start, window_end)
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
        by_mode=mode_costs(total_cost, scope.currency, modes),
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
