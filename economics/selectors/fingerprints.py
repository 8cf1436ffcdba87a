"""Input fingerprints of asset months: what each node-month's figures are computed from.

The nightly job recomputes a month only when its fingerprint differs from the one stored on its
row. A fingerprint digests, per node and calendar month (the same months `gpu_seconds` yields):
the node's and its site's cost and power columns and its retirement, the month's span of service
(its end moves with `now` in the running month), and the allocations and outages that overlap
it (an allocation with its nesting, listing and the listing's split terms, so a resale listed
or sold over a month changes that month). Two parts are added in Python: the revenue placed on
the month (from the attribution, since a line's placement depends on other lines, with each
piece's role: the provider's own, or its share, the seller's or the fee of a resale) and the FX
rate each conversion the month needs would use (capex currency from power, opex and revenue
currencies, on the month's last day).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.db import connection

from economics.fx import FxTable
from economics.selectors.gpu_hours import NODE_RETIREMENT_JOIN_SQL, NODE_SERVICE_SQL
from economics.selectors.revenue import RevenuePiece, next_month

# Bump when the computation of a month changes, so that every stored month is recomputed once.
FORMULA_VERSION = "2"  # 2: resold time and resale splits

# One row per node-month; each part digested separately so a reader can see what counts.
INPUT_FINGERPRINT_SQL = (
    """
WITH node AS (
    SELECT n.id, n.capex_currency, s.power_currency, s.opex_currency,
           concat_ws('|', n.capex, n.capex_currency, n.salvage_value, n.service_life_months,
                     n.power_idle_kw, n.power_full_kw, n.gpu_count, n.acquired_on,
                     s.pue, s.power_price_per_kwh, s.power_currency,
                     s.opex_per_node_month, s.opex_currency) AS costs,
"""
    + NODE_SERVICE_SQL
    + """    FROM inventory_node n
    JOIN inventory_site s ON s.id = n.site_id
"""
    + NODE_RETIREMENT_JOIN_SQL
    + """    WHERE n.id = ANY(%(node_ids)s)
),
node_month AS (
    SELECT node.id AS node_id, node.capex_currency, node.power_currency, node.opex_currency,
           node.costs, m AS month_start,
           node.service * tstzrange(m, m + interval '1 month', '[)') AS span
    FROM node
    CROSS JOIN LATERAL generate_series(
        date_trunc('month', lower(node.service) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
        %(now)s::timestamptz - interval '1 microsecond',
        interval '1 month'
    ) AS m
    WHERE NOT isempty(node.service * tstzrange(m, m + interval '1 month', '[)'))
),
allocations AS (
    SELECT nm.node_id, nm.month_start,
           md5(string_agg(concat_ws(',', a.id, a.gpu_id, a.lease_id, a.period, a.released_at,
                                    a.parent_id, a.listing_id, rl.provider_share_pct,
                                    rl.marketplace_fee_pct),
                          ';' ORDER BY a.id)) AS digest
    FROM node_month nm
    JOIN leasing_allocation a ON a.node_id = nm.node_id AND a.period && nm.span
    -- Resold time: the sale (the nested rows' lease) and the listing's split terms.
    LEFT JOIN leasing_resalelisting rl ON rl.id = a.listing_id
    GROUP BY nm.node_id, nm.month_start
),
outages AS (
    SELECT nm.node_id, nm.month_start,
           md5(string_agg(concat_ws(',', o.id, o.gpu_id, o.start, o."end"),
                          ';' ORDER BY o.id)) AS digest
    FROM node_month nm
    JOIN inventory_outage o ON o.node_id = nm.node_id
     AND tstzrange(o.start, COALESCE(o."end", 'infinity'::timestamptz), '[)') && nm.span
    GROUP BY nm.node_id, nm.month_start
)
SELECT nm.node_id, nm.month_start, nm.capex_currency, nm.power_currency, nm.opex_currency,
       concat_ws('/', nm.costs, lower(nm.span), upper(nm.span),
                 COALESCE(al.digest, '-'), COALESCE(ou.digest, '-')) AS inputs
FROM node_month nm
LEFT JOIN allocations al USING (node_id, month_start)
LEFT JOIN outages ou USING (node_id, month_start)
"""
)


class _Rates:
    """The rate a conversion would use, per pair and month, looked up once."""

    def __init__(self) -> None:
        self.fx = FxTable.load()
        self.seen: dict[tuple[str, str, date], str] = {}

    def __call__(self, source: str, target: str, month: date) -> str:
        key = (source, target, month)
        if key not in self.seen:
            on = next_month(month) - timedelta(days=1)
            conversion = self.fx.convert(Decimal(1), source, target, on)
            self.seen[key] = (
                "none"
                if conversion is None
                else f"{conversion.rate}@{conversion.rate_valid_on}:{conversion.inverted}"
            )
        return self.seen[key]


def _revenue_digest(pieces: Iterable[RevenuePiece]) -> str:
    """Order-free digest of a node-month's revenue pieces (amounts at full precision)."""
    parts = sorted(
        f"{piece.document}|{piece.kind}|{piece.role}|{piece.currency}|{piece.amount}"
        for piece in pieces
    )
    return hashlib.md5(";".join(parts).encode()).hexdigest()


def month_fingerprints(
    *,
    node_ids: Sequence[int],
    now: datetime,
    revenue: dict[tuple[int, date], list[RevenuePiece]],
) -> dict[tuple[int, date], str]:
    """The input fingerprint of every month of the nodes that the job would compute."""
    if not node_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(INPUT_FINGERPRINT_SQL, {"node_ids": list(node_ids), "now": now})
        rows = cursor.fetchall()
    rates = _Rates()
    fingerprints = {}
    for node_id, month_start, currency, power_currency, opex_currency, inputs in rows:
        month = month_start.astimezone(UTC).date()
        pieces = revenue.get((node_id, month)) or []
        sources = {power_currency, opex_currency, *(piece.currency for piece in pieces)}
        used = ",".join(
            f"{source}:{rates(source, currency, month)}" for source in sorted(sources - {currency})
        )
        digest = _revenue_digest(pieces) if pieces else "-"
        fingerprints[node_id, month] = hashlib.md5(
            f"{FORMULA_VERSION}/{inputs}/{digest}/{used}".encode()
        ).hexdigest()
    return fingerprints


def stored_fingerprints(*, node_ids: Sequence[int]) -> dict[int, dict[date, str]]:
    """The fingerprints on the stored month rows of the nodes, by node and month."""
    stored: dict[int, dict[date, str]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT node_id, month, inputs_fingerprint FROM billing_assetmonth"
            " WHERE node_id = ANY(%s)",
            [list(node_ids)],
        )
        for node_id, month, fingerprint in cursor.fetchall():
            stored[node_id][month] = fingerprint
    return stored
