"""The "free GPU" rule, written once: capacity search, quotes and placement all use it.

A GPU is free for a window when it is healthy, its node is active, no live allocation overlaps
(preemptible ones are not in the way of an on-demand or reserved request: they can be cut short)
and no outage of the node or of that GPU meets the window. `FREE_GPU_CONDITION` decides one GPU
(`g`, of node `n`); `BLOCKED_PER_NODE_SQL` is the same rule set-based, for searches over many
nodes at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from inventory.choices import GpuHealth, NodeStatus
from leasing.choices import PricingMode

# Parameters: healthy, active, start, end, may_preempt (see free_params).
FREE_GPU_CONDITION = """
g.health = %(healthy)s
AND n.status = %(active)s
AND NOT EXISTS (
  SELECT 1 FROM leasing_allocation a
  WHERE a.gpu_id = g.id AND a.released_at IS NULL
    AND a.period && tstzrange(%(start)s, %(end)s, '[)')
    AND NOT (a.preemptible AND %(may_preempt)s)
)
AND NOT EXISTS (
  SELECT 1 FROM inventory_outage ou
  WHERE ou.node_id = g.node_id AND (ou.gpu_id IS NULL OR ou.gpu_id = g.id)
    AND ou.start < %(end)s AND (ou."end" IS NULL OR ou."end" > %(start)s)
)"""

# GPUs of each node that FREE_GPU_CONDITION refuses for a reason of their own: an overlapping
# live allocation, an outage of that GPU, or bad health. A GPU with several reasons counts once
# (UNION, not UNION ALL). Allocations are read node by node from the covering SP-GiST index over
# live periods (node, GPU and preemptible included): no heap visit, no per-GPU probe. Node-wide
# reasons (inactive node, node outage) are applied by the caller to the whole node. Needs the
# CTE `pool` (offer_id, node_id, gpu_count, node_status): only its nodes are counted, by hash
# (`+ 0` keeps the planner, which underestimates the pool, from probing node by node).
BLOCKED_PER_NODE_SQL = """
SELECT blocked.node_id, count(*) AS blocked
FROM (
  SELECT a.node_id, a.gpu_id FROM leasing_allocation a
  WHERE a.released_at IS NULL
    AND a.period && tstzrange(%(start)s, %(end)s, '[)')
    AND NOT (a.preemptible AND %(may_preempt)s)
    AND a.node_id + 0 IN (SELECT pool.node_id FROM pool)
  UNION
  SELECT g.node_id, g.id FROM inventory_outage ou
  JOIN inventory_gpu g ON g.id = ou.gpu_id AND g.node_id = ou.node_id
  WHERE ou.start < %(end)s AND (ou."end" IS NULL OR ou."end" > %(start)s)
  UNION
  SELECT g.node_id, g.id FROM inventory_gpu g WHERE g.health <> %(healthy)s
) blocked
GROUP BY blocked.node_id"""

# Free GPUs per node of the pool, set-based: the node's GPUs minus its blocked ones, for active
# nodes with no node-wide outage in the window (a hashed NOT IN: few nodes are down at once).
# Needs the CTEs `pool` and `blocked_per_node`.
# A node has exactly gpu_count GPU rows (inventory.services.nodes keeps them in step; the pool's
# GPU total already counts by it).
SEARCH_FREE_PER_NODE_SQL = """
SELECT p.offer_id, p.node_id, p.gpu_count - coalesce(b.blocked, 0) AS free
FROM pool p
LEFT JOIN blocked_per_node b ON b.node_id = p.node_id
WHERE p.node_status = %(active)s
  AND p.gpu_count > coalesce(b.blocked, 0)
  AND p.node_id NOT IN (
    SELECT ou.node_id FROM inventory_outage ou
    WHERE ou.gpu_id IS NULL
      AND ou.start < %(end)s AND (ou."end" IS NULL OR ou."end" > %(start)s))"""

# Free GPUs per node of the pool from the free-capacity timeline (leasing.NodeFreeSpan): the
# node's span containing the window's start lists when each free GPU's next booking or outage
# begins, sorted, so the GPUs free for the whole window are those free until `end` or later:
# cardinality minus width_bucket (a binary search: entries <= end - 1 microsecond). `{column}` is
# free_until or free_until_strict (see span_column). Two plans: set-based reads the span of every
# node in service containing `start` once (SPANS_FREE_CTE_SQL, which
# leasing.selectors.capacity_statement sums by pool key); per node
# (SPANS_FREE_PER_NODE_PROBE_SQL) takes each pool node's first span ending after `start` from the
# (node, end) index and keeps it when it has begun by `start` (no such span: nothing free then);
# `{pool}` names the CTE of pool rows it probes.
#
# The spans containing `start`, read by length class from one btree (leasing 0020): a finite span
# of class k (0..16) is shorter than 2^k hours, so it starts in (start - 2^k h, start]: one range
# scan per class, each reading few spans that do not contain `start` (fewer than one per span
# found); class 17 (longer finite spans) has no lower limit; spans open at the start (class -1)
# are keyed by their end, spans open at the end (class 99) by their start. Each span comes with
# its node's pool key (site, GPU model; leasing 0021) and interconnect (leasing 0024), which the
# index covers too; the index holds only the spans of nodes in service (leasing 0026), and each
# branch says `sp.in_service` so that PostgreSQL reads it.
SPANS_FREE_CTE_SQL = """
SELECT sp.node_id, sp.site_id, sp.gpu_model_id, sp.nvlink, sp.infiniband,
       cardinality(sp.{column})
       - width_bucket(%(end)s::timestamptz - interval '1 microsecond', sp.{column}) AS free
FROM (
  SELECT k AS class,
         CASE WHEN k < 17 THEN %(start)s::timestamptz - interval '1 hour' * 2 ^ k
              ELSE '-infinity' END AS after
  FROM generate_series(0, 17) AS k
) c
CROSS JOIN LATERAL (
  SELECT sp.node_id, sp.site_id, sp.gpu_model_id, sp.nvlink, sp.infiniband, sp.{column}
  FROM leasing_nodefreespan sp
  WHERE sp.in_service
    AND leasing_free_span_class(sp.during) = c.class
    AND leasing_free_span_key(sp.during) > c.after
    AND leasing_free_span_key(sp.during) <= %(start)s::timestamptz
    AND upper(sp.during) > %(start)s::timestamptz
) sp
UNION ALL
SELECT sp.node_id, sp.site_id, sp.gpu_model_id, sp.nvlink, sp.infiniband,
       cardinality(sp.{column})
       - width_bucket(%(end)s::timestamptz - interval '1 microsecond', sp.{column})
FROM leasing_nodefreespan sp
WHERE sp.in_service
  AND leasing_free_span_class(sp.during) = -1
  AND leasing_free_span_key(sp.during) > %(start)s::timestamptz
UNION ALL
SELECT sp.node_id, sp.site_id, sp.gpu_model_id, sp.nvlink, sp.infiniband,
       cardinality(sp.{column})
       - width_bucket(%(end)s::timestamptz - interval '1 microsecond', sp.{column})
FROM leasing_nodefreespan sp
WHERE sp.in_service
  AND leasing_free_span_class(sp.during) = 99
  AND leasing_free_span_key(sp.during) <= %(start)s::timestamptz"""

SPANS_FREE_PER_NODE_PROBE_SQL = """
SELECT p.offer_id, p.node_id,
       cardinality(f.{column})
       - width_bucket(%(end)s::timestamptz - interval '1 microsecond', f.{column}) AS free
FROM {pool} p
CROSS JOIN LATERAL (
  SELECT sp.during, sp.{column}
  FROM leasing_nodefreespan sp
  WHERE sp.node_id = p.node_id
    AND coalesce(upper(sp.during), 'infinity') > %(start)s::timestamptz
  ORDER BY coalesce(upper(sp.during), 'infinity')
  LIMIT 1
) f
WHERE p.node_status = %(active)s
  AND (lower(f.during) IS NULL OR lower(f.during) <= %(start)s::timestamptz)
  AND cardinality(f.{column})
      > width_bucket(%(end)s::timestamptz - interval '1 microsecond', f.{column})"""

# The nodes of each offer of `{offers}` (a CTE with id, site_id, gpu_model_id and named_nodes):
# the named ones, or every node of its model at its site.
POOL_SQL = """
SELECT co.id AS offer_id, n.id AS node_id, n.gpu_count, n.status AS node_status
FROM {offers} co
JOIN inventory_node n ON n.site_id = co.site_id AND n.gpu_model_id = co.gpu_model_id
WHERE n.status <> %(retired)s {node_filters}
  AND (NOT co.named_nodes OR EXISTS (
    SELECT 1 FROM leasing_offer_nodes x WHERE x.offer_id = co.id AND x.node_id = n.id))"""

# Free GPUs per node of the pool, GPU by GPU: best when the pool is a few nodes.
FREE_PER_NODE_SQL = f"""
SELECT p.offer_id, p.node_id, count(*) AS free
FROM pool p
JOIN inventory_node n ON n.id = p.node_id
JOIN inventory_gpu g ON g.node_id = n.id
WHERE {FREE_GPU_CONDITION}
GROUP BY p.offer_id, p.node_id"""


def free_params(*, start: datetime, end: datetime, may_preempt: bool) -> dict[str, Any]:
    """The parameters FREE_GPU_CONDITION and BLOCKED_PER_NODE_SQL read."""
    return {
        "start": start,
        "end": end,
        "healthy": GpuHealth.OK,
        "active": NodeStatus.ACTIVE,
        "retired": NodeStatus.RETIRED,
        "may_preempt": may_preempt,
    }


def span_column(pricing_mode: str) -> str:
    """The NodeFreeSpan column of a request: interruptible ones count preemptible bookings."""
    return "free_until" if may_preempt_for(pricing_mode) else "free_until_strict"


def may_preempt_for(pricing_mode: str) -> bool:
    """Interruptible requests must not count preemptible GPUs as free: they cannot preempt."""
    return pricing_mode != PricingMode.INTERRUPTIBLE


@dataclass(frozen=True)
class OfferCapacity:
    """Free GPUs of one offer's pool for a window, node by node."""

    offer_id: int
    free_by_node: dict[int, int]

    @property
    def free_gpus(self) -> int:
        """Free GPUs across the pool."""
        return sum(self.free_by_node.values())

    @property
    def max_free_on_one_node(self) -> int:
        """The most free GPUs on a single node (0 when none)."""
        return max(self.free_by_node.values(), default=0)


_FREE_COUNTS_SQL = f"""
WITH candidate_offers AS (
  SELECT o.id, o.site_id, o.gpu_model_id,
         EXISTS (SELECT 1 FROM leasing_offer_nodes x WHERE x.offer_id = o.id) AS named_nodes
  FROM leasing_offer o WHERE o.id = ANY(%(offer_ids)s)
),
pool AS ({POOL_SQL.format(offers="candidate_offers", node_filters="")}),
free_per_node AS ({FREE_PER_NODE_SQL})
SELECT offer_id, node_id, free FROM free_per_node
"""


def free_gpu_counts(
    *, offer_ids: Sequence[int], start: datetime, end: datetime, pricing_mode: str
) -> dict[int, OfferCapacity]:
    """Free GPUs per node of each offer's pool for the whole [start, end), in one query.

    The same rule as capacity search: healthy GPUs of active nodes, no overlapping live
    allocation (preemptible ones do not count for on-demand and reserved requests) and no
    outage meeting the window. Offers with nothing free map to an empty OfferCapacity.
    """
    capacities = {offer_id: OfferCapacity(offer_id, {}) for offer_id in offer_ids}
    if not capacities:
        return capacities
    params = free_params(start=start, end=end, may_preempt=may_preempt_for(pricing_mode))
    params["offer_ids"] = list(capacities)
    with connection.cursor() as cursor:
        cursor.execute(_FREE_COUNTS_SQL, params)
        for offer_id, node_id, free in cursor.fetchall():
            capacities[offer_id].free_by_node[node_id] = free
    return capacities
