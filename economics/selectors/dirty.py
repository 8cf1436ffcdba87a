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
    with connection.cursor() as cursor:
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


def _span_in(span: tuple[datetime, datetime], month: date) -> str:
    """The part of the month the node was in service (moves with `now` in the running month)."""
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    following = next_month(month)
    end = datetime(following.year, following.month, 1, tzinfo=UTC)
    return f"{max(span[0], start).isoformat()}~{min(span[1], end).isoformat()}"


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
    fingerprints = {}
    for node in nodes:
        currency, site = node.capex_currency, node.site
        costs = {site.power_currency, site.opex_currency}
        for month in months.get(node.pk, []):
            pieces = revenue.get((node.pk, month)) or []
            sources = costs | {piece.currency for piece in pieces}
            used = ",".join(
                f"{source}:{rates(source, currency, month)}"
                for source in sorted(sources - {currency})
            )
            digest = revenue_digest(pieces) if pieces else "-"
            span = _span_in(spans[node.pk], month)
            fingerprints[node.pk, month] = hashlib.md5(
                f"{FORMULA_VERSION}/{span}/{digest}/{used}".encode()
            ).hexdigest()
    return fingerprints
