"""The facts of one scope over one window: its share of its nodes' costs, its traffic per hour,
its latency percentiles per hour, and its GPU-hours by workload tag.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection

from billing.models import UsageRollup
from core.money import round_money
from economics.fx import FxTable
from economics.models import AssetMonth
from economics.selectors.gpu_hours import HOUR, HOURS
from economics.selectors.revenue import next_month
from economics.selectors.scopes import Scope

ZERO = Decimal("0")

# Exact p95 / p99 of time-to-first-token and end-to-end latency per hour, over the successful
# online requests of the given contracts (batch requests are promised a deadline, not latency).
HOURLY_LATENCY_SQL = """
SELECT date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS hour,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY ttft_ms),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY ttft_ms),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY e2e_ms),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY e2e_ms)
FROM billing_usageevent
WHERE contract_id = ANY(%(contracts)s) AND status = 'success' AND mode = 'online'
  AND occurred_at >= %(start)s AND occurred_at < %(end)s
GROUP BY 1
ORDER BY 1
"""


# Per contract and mode: requests, successes, successful tokens, and the tokens the GPUs
# computed (input not served from the prompt cache, plus output) for every request that reached
# them (rejected ones never did).
MODE_USAGE_SQL = """
SELECT contract_id, mode,
       count(*),
       count(*) FILTER (WHERE status = 'success'),
       coalesce(sum(input_tokens + output_tokens) FILTER (WHERE status = 'success'), 0),
       coalesce(
           sum(input_tokens - cached_input_tokens + output_tokens)
               FILTER (WHERE status <> 'rejected'),
           0
       )
FROM billing_usageevent
WHERE contract_id = ANY(%(contracts)s)
  AND occurred_at >= %(start)s AND occurred_at < %(end)s
GROUP BY contract_id, mode
"""


@dataclass(frozen=True, slots=True)
class ModeUsage:
    """One mode's traffic in a scope and period (the scope's share of each contract)."""

    requests_total: int
    requests_successful: int
    tokens_successful: int
    tokens_computed: int


def scope_mode_usage(scope: Scope, start: datetime, end: datetime) -> dict[str, ModeUsage]:
    """Online and batch traffic of the scope's contracts in [start, end), mode by mode."""
    if not scope.contract_shares:
        return {}
    sums: dict[str, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO, ZERO, ZERO])
    with connection.cursor() as cursor:
        cursor.execute(
            MODE_USAGE_SQL, {"contracts": list(scope.contract_shares), "start": start, "end": end}
        )
        for contract_id, mode, *values in cursor.fetchall():
            share = scope.contract_shares[contract_id]
            for index, value in enumerate(values):
                sums[mode][index] += value * share
    return {
        mode: ModeUsage(*(round(value) for value in values))
        for mode, values in sorted(sums.items())
    }


def midnight(day: date) -> datetime:
    """00:00 UTC of the day."""
    return datetime.combine(day, time(), tzinfo=UTC)


def scope_costs(
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
        month_start = midnight(month)
        month_end = min(midnight(next_month(month)), computed_at)
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


def scope_usage(
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


def scope_latency(scope: Scope, start: datetime, end: datetime) -> dict[datetime, tuple[Any, ...]]:
    """Per hour: p95 and p99 of TTFT and of end-to-end latency of the successful requests."""
    if not scope.contract_shares:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            HOURLY_LATENCY_SQL,
            {"contracts": list(scope.contract_shares), "start": start, "end": end},
        )
        return {row[0]: tuple(row[1:]) for row in cursor.fetchall()}


def scope_workload_hours(scope: Scope, start: datetime, end: datetime) -> dict[str, Decimal]:
    """GPU-hours of lease allocations on the scope's nodes in the period, by workload tag.

    Resold time counts once, under the buyer's workload: a sold nested row adds its seconds to
    its sublease's workload and takes them off its parent's (the seller's), inside which it lies.
    """
    sql = """
        SELECT workload, sum(seconds)
        FROM (
            SELECT l.workload,
                   EXTRACT(EPOCH FROM upper(a.period * r) - lower(a.period * r)) AS seconds
            FROM leasing_allocation a
            JOIN leasing_lease l ON l.id = a.lease_id
            CROSS JOIN (SELECT tstzrange(%(start)s, %(end)s, '[)') AS r) bounds
            WHERE a.node_id = ANY(%(nodes)s) AND a.released_at IS NULL AND a.period && r
            UNION ALL
            SELECT pl.workload,
                   -EXTRACT(EPOCH FROM upper(a.period * r) - lower(a.period * r))
            FROM leasing_allocation a
            JOIN leasing_allocation p ON p.id = a.parent_id
            JOIN leasing_lease pl ON pl.id = p.lease_id
            CROSS JOIN (SELECT tstzrange(%(start)s, %(end)s, '[)') AS r) bounds
            WHERE a.node_id = ANY(%(nodes)s) AND a.lease_id IS NOT NULL
              AND a.released_at IS NULL AND a.period && r
        ) parts
        GROUP BY workload
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"start": start, "end": end, "nodes": list(scope.node_shares)})
        return {
            workload: (Decimal(seconds) / HOUR).quantize(HOURS)
            for workload, seconds in cursor.fetchall()
        }
