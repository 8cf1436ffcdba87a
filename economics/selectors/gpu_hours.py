"""GPU-hours of nodes per time bucket: in service, available (outages excluded), allocated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from core.rows import bulk_cursor

# A node's service as a range (from acquisition to its retirement or `now`; the node `n` and
# its retirement `r`), and the join that finds the retirement: shared with the fingerprints.
NODE_SERVICE_SQL = """\
           tstzrange(
               (n.acquired_on::timestamp AT TIME ZONE 'UTC'),
               GREATEST(
                   (n.acquired_on::timestamp AT TIME ZONE 'UTC'),
                   LEAST(COALESCE(r.retired_at, 'infinity'::timestamptz), %(now)s)
               ),
               '[)'
           ) AS service
"""
NODE_RETIREMENT_JOIN_SQL = """\
    LEFT JOIN (
        SELECT id, min(history_date) AS retired_at
        FROM inventory_historicalnode WHERE status = 'retired' GROUP BY id
    ) r ON r.id = n.id
"""

# GPU-seconds per node and bucket (a month, a week, an hour): available = GPU count x the
# seconds the node was in service minus the GPU-seconds under outage; allocated = top-level lease
# allocations net of the outages of their GPU; resold = the sold nested rows among them (a
# buyer's sublease inside the seller's allocation), already counted in allocated.
# `multirange_seconds` is created by migration billing 0006. Buckets are clipped to the node's
# service: from acquisition to retirement (the first history row with status retired) or `now`.
GPU_SECONDS_SQL = (
    """
WITH node AS (
    SELECT n.id, n.gpu_count, n.site_id, n.gpu_model_id,
"""
    + NODE_SERVICE_SQL
    + """    FROM inventory_node n
"""
    + NODE_RETIREMENT_JOIN_SQL
    + """    WHERE n.id = ANY(%(node_ids)s)
),
bucket AS (
    SELECT node.id AS node_id, node.gpu_count, b AS bucket_start,
           node.service * tstzrange(b, b + %(step)s::interval, '[)') AS span
    FROM node
    CROSS JOIN LATERAL generate_series(
        COALESCE(
            %(start)s::timestamptz,
            date_trunc('month', lower(node.service) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
        ),
        %(end)s::timestamptz - interval '1 microsecond',
        %(step)s::interval
    ) AS b
    WHERE NOT isempty(node.service)
),
node_out AS (
    SELECT o.node_id,
           range_agg(tstzrange(
               o.start, GREATEST(o.start, LEAST(COALESCE(o."end", %(now)s), %(now)s)), '[)'
           )) AS spans
    FROM inventory_outage o
    WHERE o.gpu_id IS NULL AND o.node_id = ANY(%(node_ids)s) AND o.start < %(now)s
      AND (%(start)s::timestamptz IS NULL OR COALESCE(o."end", %(now)s) > %(start)s)
    GROUP BY o.node_id
),
gpu_out AS (
    SELECT o.node_id, o.gpu_id,
           range_agg(tstzrange(
               o.start, GREATEST(o.start, LEAST(COALESCE(o."end", %(now)s), %(now)s)), '[)'
           )) AS spans
    FROM inventory_outage o
    WHERE o.gpu_id IS NOT NULL AND o.node_id = ANY(%(node_ids)s) AND o.start < %(now)s
      AND (%(start)s::timestamptz IS NULL OR COALESCE(o."end", %(now)s) > %(start)s)
    GROUP BY o.node_id, o.gpu_id
),
alloc AS (
    -- A nested row (resold time) lies inside its parent's (the seller's) on the same GPU: the
    -- parent counts as allocated, the nested row only as resold, so no time is counted twice.
    SELECT a.node_id, a.gpu_id, a.parent_id IS NOT NULL AS nested,
           tstzrange(lower(a.period), LEAST(upper(a.period), %(now)s), '[)') AS span
    FROM leasing_allocation a
    WHERE a.lease_id IS NOT NULL AND a.released_at IS NULL
      AND a.node_id = ANY(%(node_ids)s) AND lower(a.period) < %(now)s
      -- With `start`, what ended before it falls in no bucket.
      AND (%(start)s::timestamptz IS NULL OR upper(a.period) > %(start)s)
),
alloc_seconds AS (
    -- Without outages on the node the overlap is a plain range: no multirange work.
    SELECT b.node_id, b.bucket_start, al.nested,
           CASE WHEN nout.spans IS NULL AND gout.spans IS NULL
                THEN EXTRACT(EPOCH FROM upper(al.span * b.span) - lower(al.span * b.span))
                ELSE multirange_seconds(
                    tstzmultirange(al.span * b.span)
                    - COALESCE(nout.spans, '{}'::tstzmultirange)
                    - COALESCE(gout.spans, '{}'::tstzmultirange)) END AS seconds
    FROM bucket b
    JOIN alloc al ON al.node_id = b.node_id AND al.span && b.span
    LEFT JOIN node_out nout ON nout.node_id = b.node_id
    LEFT JOIN gpu_out gout ON gout.node_id = b.node_id AND gout.gpu_id = al.gpu_id
    WHERE NOT isempty(b.span)
),
allocated AS (
    SELECT node_id, bucket_start,
           COALESCE(sum(seconds) FILTER (WHERE NOT nested), 0) AS seconds,
           COALESCE(sum(seconds) FILTER (WHERE nested), 0) AS resold
    FROM alloc_seconds
    GROUP BY node_id, bucket_start
),
gpu_down AS (
    -- Single-GPU outages outside the node-wide ones, grouped once per bucket (joined, not a
    -- subquery per bucket).
    SELECT b.node_id, b.bucket_start,
           sum(multirange_seconds(
               (g.spans - COALESCE(nout.spans, '{}'::tstzmultirange)) * tstzmultirange(b.span)
           )) AS seconds
    FROM bucket b
    JOIN gpu_out g ON g.node_id = b.node_id
    LEFT JOIN node_out nout ON nout.node_id = b.node_id
    GROUP BY b.node_id, b.bucket_start
)
SELECT b.node_id, b.bucket_start,
       multirange_seconds(tstzmultirange(b.span)) AS service_seconds,
       b.gpu_count * multirange_seconds(tstzmultirange(b.span))
         - b.gpu_count * CASE WHEN nout.spans IS NULL THEN 0
             ELSE multirange_seconds(nout.spans * tstzmultirange(b.span)) END
         - COALESCE(gd.seconds, 0) AS available_seconds,
       COALESCE(al.seconds, 0) AS allocated_seconds,
       COALESCE(al.resold, 0) AS resold_seconds
FROM bucket b
LEFT JOIN node_out nout ON nout.node_id = b.node_id
LEFT JOIN allocated al ON al.node_id = b.node_id AND al.bucket_start = b.bucket_start
LEFT JOIN gpu_down gd ON gd.node_id = b.node_id AND gd.bucket_start = b.bucket_start
WHERE %(keep_empty)s OR NOT isempty(b.span)
ORDER BY b.node_id, b.bucket_start
"""
)

HOUR = Decimal("3600")
HOURS = Decimal("0.0001")


@dataclass(frozen=True, slots=True)
class GpuSeconds:
    """One bucket of one node: service seconds, available, allocated and resold GPU-seconds.

    Resold GPU-seconds (sold to a buyer by a lessee) are part of the allocated ones.
    """

    service: Decimal
    available: Decimal
    allocated: Decimal
    resold: Decimal = Decimal(0)


def gpu_seconds(
    *,
    node_ids: Sequence[int],
    now: datetime,
    step: str,
    start: datetime | None = None,
    end: datetime | None = None,
    keep_empty: bool = False,
) -> dict[tuple[int, datetime], GpuSeconds]:
    """GPU-seconds of each node per bucket of `step` ('1 month', '1 hour', '7 days').

    Without `start`, buckets begin at each node's acquisition month; they run to `end`
    (default `now`). `keep_empty` keeps buckets outside the node's service, at zero.
    """
    if not node_ids:
        return {}
    params: dict[str, Any] = {
        "node_ids": list(node_ids),
        "now": now,
        "step": step,
        "start": start,
        "end": end or now,
        "keep_empty": keep_empty,
    }
    with bulk_cursor() as cursor:
        cursor.execute(GPU_SECONDS_SQL, params)
        return {
            (node_id, bucket): GpuSeconds(
                Decimal(service), Decimal(available), Decimal(allocated), Decimal(resold)
            )
            for node_id, bucket, service, available, allocated, resold in cursor.fetchall()
        }
