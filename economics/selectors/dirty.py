"""What changed since the nightly job last ran, found without scanning every input.

Two sources, each covering what it can see cheaply and exactly:
- the dirty set (`economics_dirtymonth`, migration economics 0006): statement-level triggers on
  allocations, outages, the node's and its site's cost columns and the node's retirement mark,
  per node, the first month whose figures a change can move;
- a per-month digest of what the triggers cannot place on a node: the revenue the attribution
  puts on the month (a line's placement depends on other lines, leases and SLA offerings), the
  FX rate each conversion of the month uses, and the month's span of service. It is stored as
  `AssetMonth.inputs_fingerprint`.
The digest also holds the month's span of service, so the running month (its end moves with
`now`) and a month that was running at the last run and is whole now are recomputed. The job
recomputes a node from the earliest month either source names.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from django.db import connection

from core.rows import bulk_cursor

# The rate look-up and the revenue digest are the fingerprints' own, so both digests agree on
# what counts.
from economics.selectors.fingerprints import FORMULA_VERSION, Rates, revenue_digest
from economics.selectors.gpu_hours import NODE_RETIREMENT_JOIN_SQL, NODE_SERVICE_SQL
from economics.selectors.revenue import RevenuePiece, next_month
from inventory.models import Node

# Take the marks of the nodes (all with NULL): deleted in the job's transaction, so a mark
# committed after this statement stays for the next run, and a rolled-back run keeps them all.
DIRTY_TAKE_SQL = """
WITH taken AS (
    DELETE FROM economics_dirtymonth
    WHERE %(node_ids)s::bigint[] IS NULL OR node_id = ANY(%(node_ids)s::bigint[])
    RETURNING node_id, month
)
SELECT node_id, min(month) FROM taken GROUP BY node_id
"""

SERVICE_SPANS_SQL = (
    """
SELECT n.id, lower(service), upper(service) FROM (
    SELECT n.id,
"""
    + NODE_SERVICE_SQL
    + """    FROM inventory_node n
"""
    + NODE_RETIREMENT_JOIN_SQL
    + """    WHERE n.id = ANY(%(node_ids)s)
) n
"""
)


def dirty_months_take(*, node_ids: Sequence[int] | None) -> dict[int, date]:
    """Each marked node's first dirty month; the marks taken are deleted (call in the job's
    transaction)."""
    with connection.cursor() as cursor:
        cursor.execute(DIRTY_TAKE_SQL, {"node_ids": None if node_ids is None else list(node_ids)})
        return dict(cursor.fetchall())


def _month_of(moment: datetime) -> date:
    moment = moment.astimezone(UTC)
    return date(moment.year, moment.month, 1)


def service_months(
    *, node_ids: Sequence[int], now: datetime
) -> tuple[dict[int, list[date]], dict[int, tuple[datetime, datetime]]]:
    """The calendar months each node was in service up to `now` (the job's months), and its
    span of service."""
    months: dict[int, list[date]] = defaultdict(list)
    spans: dict[int, tuple[datetime, datetime]] = {}
    if not node_ids:
        return months, spans
    with bulk_cursor() as cursor:
        cursor.execute(SERVICE_SPANS_SQL, {"node_ids": list(node_ids), "now": now})
        rows = cursor.fetchall()
    for node_id, start, end in rows:
        if end <= start:
            continue
        spans[node_id] = (start, end)
        month, last = _month_of(start), _month_of(end - timedelta(microseconds=1))
        while month <= last:
            months[node_id].append(month)
            month = next_month(month)
    return months, spans


def _month_bounds(month: date) -> tuple[datetime, datetime]:
    following = next_month(month)
    return (
        datetime(month.year, month.month, 1, tzinfo=UTC),
        datetime(following.year, following.month, 1, tzinfo=UTC),
    )


def _span_in(span: tuple[datetime, datetime], month: date) -> str:
    """The part of the month the node was in service (moves with `now` in the running month)."""
    start, end = _month_bounds(month)
    return f"{max(span[0], start).isoformat()}~{min(span[1], end).isoformat()}"


class _Spans:
    """`_span_in`, with the text of a whole month in service (most months) made once."""

    def __init__(self) -> None:
        self.whole: dict[date, tuple[datetime, datetime, str]] = {}

    def __call__(self, span: tuple[datetime, datetime], month: date) -> str:
        if month not in self.whole:
            start, end = _month_bounds(month)
            self.whole[month] = (start, end, f"{start.isoformat()}~{end.isoformat()}")
        start, end, text = self.whole[month]
        if span[0] <= start and span[1] >= end:
            return text
        return _span_in(span, month)


def revenue_fingerprints(
    *,
    nodes: Sequence[Node],
    months: dict[int, list[date]],
    spans: dict[int, tuple[datetime, datetime]],
    revenue: dict[tuple[int, date], list[RevenuePiece]],
) -> dict[tuple[int, date], str]:
    """Each node-month's digest of its span of service, its revenue pieces and the FX rates its
    conversions use."""
    rates = Rates()
    span_text = _Spans()
    # The rates part of a digest, per (currencies to convert, target, month): a few hundred.
    used_by: dict[tuple[frozenset[str], str, date], str] = {}
    fingerprints = {}
    for node in nodes:
        in_service = months.get(node.pk)
        if not in_service:
            continue
        currency, site, node_span = node.capex_currency, node.site, spans[node.pk]
        costs = frozenset((site.power_currency, site.opex_currency))
        for month in in_service:
            pieces = revenue.get((node.pk, month))
            sources = costs.union(piece.currency for piece in pieces) if pieces else costs
            key = (sources, currency, month)
            used = used_by.get(key)
            if used is None:
                used = used_by[key] = ",".join(
                    f"{source}:{rates(source, currency, month)}"
                    for source in sorted(sources - {currency})
                )
            digest = revenue_digest(pieces) if pieces else "-"
            span = span_text(node_span, month)
            fingerprints[node.pk, month] = hashlib.md5(
                f"{FORMULA_VERSION}/{span}/{digest}/{used}".encode()
            ).hexdigest()
    return fingerprints
