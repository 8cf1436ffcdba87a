"""The stored months before the ones a run recomputes, summed in SQL for the payback.

Payback and the carried-over figures read of earlier months only: how many, their allocated
GPU-hours and revenue summed, the month that reached capex, the last three whole months and the
last three months, the last month's cumulative figures, and the share of each month in service
(life elapsed, for depreciation). So the nightly job reads a handful of rows per node instead of
every month of its life. Sums of stored columns are exact in SQL (numeric) as in Python; life
elapsed is summed in Python, in month order, exactly as `payback.progress_after` does.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.db import connection

from economics.payback import (
    TRAILING_MONTHS,
    ZERO,
    Earlier,
    MonthFacts,
    MonthFigures,
    Progress,
    Ratio,
)

# Months of each node in [since, before): the rows payback reads, each with its node's totals.
EARLIER_MONTHS_SQL = """
WITH wanted AS (
    SELECT * FROM unnest(%(node_ids)s::bigint[], %(since)s::date[], %(before)s::date[])
      AS d(node_id, since, before)
),
numbered AS (
    SELECT m.*, row_number() OVER (PARTITION BY m.node_id ORDER BY m.month) AS n,
           m.in_service_hours = m.hours_in_month AS whole
    FROM billing_assetmonth m
    JOIN wanted d ON d.node_id = m.node_id AND m.month >= d.since AND m.month < d.before
),
summed AS (
    SELECT m.*,
           count(*) OVER node AS months,
           sum(m.allocated_gpu_hours) OVER node AS allocated_total,
           sum(m.revenue) OVER node AS revenue_total,
           min(m.n) FILTER (WHERE m.cumulative_net_cash_flow >= m.capex) OVER node AS paid_back,
           array_agg(ARRAY[m.n, m.in_service_hours, m.hours_in_month])
             FILTER (WHERE NOT m.whole) OVER node AS partial,
           row_number() OVER (PARTITION BY m.node_id ORDER BY m.month DESC) AS from_last,
           row_number() OVER (PARTITION BY m.node_id, m.whole ORDER BY m.month DESC)
             AS from_last_kind
    FROM numbered m
    WINDOW node AS (PARTITION BY m.node_id)
)
SELECT node_id, month, hours_in_month, in_service_hours, available_gpu_hours,
       allocated_gpu_hours, utilization, energy_kwh, energy_cost, opex, depreciation, revenue,
       net_cash_flow, cumulative_net_cash_flow, book_value, capex,
       n, whole, months, allocated_total, revenue_total, paid_back, partial, from_last,
       from_last_kind
FROM summed
WHERE from_last <= %(trailing)s OR (whole AND from_last_kind <= %(trailing)s) OR n = paid_back
ORDER BY node_id, month
"""


@dataclass(frozen=True, slots=True)
class EarlierMonths:
    """A node's months before a run's first recomputed one: for payback and the carry-over."""

    earlier: Earlier
    progress: Progress


def _month(row: tuple[Any, ...]) -> tuple[MonthFacts, MonthFigures]:
    (_, month, hours, service, available, allocated, utilization, kwh) = row[:8]
    (energy, opex, depreciation, revenue, net, cumulative, book, capex) = row[8:16]
    facts = MonthFacts(
        month=month,
        hours_in_month=hours,
        in_service_hours=service,
        available_gpu_hours=available,
        allocated_gpu_hours=allocated,
        pue=ZERO,
        power_price_per_kwh=ZERO,
        opex_per_month=ZERO,
        revenue=revenue,
    )
    figures = MonthFigures(
        month=month,
        utilization=Ratio(utilization),
        energy_kwh=kwh,
        energy_cost=energy,
        opex=opex,
        depreciation=depreciation,
        revenue=revenue,
        net_cash_flow=net,
        cumulative_net_cash_flow=cumulative,
        accumulated_depreciation=capex - book,
        book_value=book,
    )
    return facts, figures


def _life_elapsed(months: int, partial: list[list[Decimal]] | None) -> Decimal:
    """Σ in-service share of each month, added in month order as `progress_after` adds them
    (a whole month's share is exactly 1)."""
    shares = {int(n): service / hours for n, service, hours in partial or []}
    life = ZERO
    for n in range(1, months + 1):
        life += shares.get(n, Decimal(1))
    return life


def earlier_months(*, since: dict[int, date], before: dict[int, date]) -> dict[int, EarlierMonths]:
    """Each node's stored months from `since` up to (not including) `before`, summarised."""
    rows_by_node: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    if before:
        params: dict[str, Any] = {
            "node_ids": list(before),
            "since": [since[node_id] for node_id in before],
            "before": list(before.values()),
            "trailing": TRAILING_MONTHS,
        }
        with connection.cursor() as cursor:
            cursor.execute(EARLIER_MONTHS_SQL, params)
            for row in cursor.fetchall():
                rows_by_node[row[0]].append(row)
    result = {}
    for node_id, rows in rows_by_node.items():
        months, allocated, revenue, paid_back, partial = rows[0][18:23]
        by_n = {row[16]: (row, _month(row)) for row in rows}
        last = [by_n[row[16]][1] for row in rows if row[23] <= TRAILING_MONTHS]
        last_whole = [by_n[row[16]][1] for row in rows if row[17] and row[24] <= TRAILING_MONTHS]
        final = by_n[max(by_n)][1][1]
        result[node_id] = EarlierMonths(
            earlier=Earlier(
                months=months,
                allocated_gpu_hours=allocated,
                revenue=revenue,
                paid_back=(paid_back, by_n[paid_back][1][1]) if paid_back else None,
                last_whole=last_whole,
                last=last,
            ),
            progress=Progress(
                final.cumulative_net_cash_flow,
                final.accumulated_depreciation,
                _life_elapsed(months, partial),
            ),
        )
    return result
