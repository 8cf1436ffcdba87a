"""The free-capacity timeline (leasing.NodeFreeSpan) as the tests read it: its rows as text, the
rows a rebuild from scratch gives, and the rows of a statement."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

SPANS_SQL = """
SELECT {key}, during::text, free_until::text[], free_until_strict::text[]
FROM leasing_nodefreespan ORDER BY node_id, lower(during) NULLS FIRST"""


def spans(*, key: str = "node_id") -> list[tuple[Any, ...]]:
    """Every span, node by node in time order, led by `key` (node_id, or id to see rewrites)."""
    with connection.cursor() as cursor:
        cursor.execute(SPANS_SQL.format(key=key))
        return cursor.fetchall()


def rebuilt() -> list[tuple[Any, ...]]:
    """The spans (led by node_id) a rebuild from scratch gives, without keeping it."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT leasing_node_free_spans_refresh(ARRAY(SELECT id FROM inventory_node))"
            )
        found = spans()
        transaction.set_rollback(True)
    return found


def rows(sql_params: tuple[str, dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The rows of one statement and its parameters (e.g. leasing.selectors.capacity_sql)."""
    sql, params = sql_params
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# The pool sums a broad search ordered by reliability reads (leasing 0027), and the same sums
# counted afresh from the nodes and outages.
_POOL_SIZES_SQL = """
SELECT site_id, gpu_model_id, nvlink, infiniband, sum(nodes), sum(gpus) FROM leasing_poolsize
GROUP BY 1, 2, 3, 4 HAVING sum(nodes) <> 0 OR sum(gpus) <> 0 ORDER BY 1, 2, 3, 4"""
_POOL_SIZES_COUNTED_SQL = """
SELECT site_id, gpu_model_id, nvlink, infiniband_gbit_s > 0, count(*), sum(gpu_count)
FROM inventory_node WHERE status <> 'retired' GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"""
_POOL_OUTAGES_SQL = """
SELECT outage_id, node_id, site_id, gpu_model_id, nvlink, infiniband, retired, gpus, start, "end"
FROM leasing_pooloutage ORDER BY 1"""
_POOL_OUTAGES_COUNTED_SQL = """
SELECT ou.id, n.id, n.site_id, n.gpu_model_id, n.nvlink, n.infiniband_gbit_s > 0,
       n.status = 'retired', CASE WHEN ou.gpu_id IS NULL THEN n.gpu_count ELSE 1 END,
       ou.start, ou."end"
FROM inventory_outage ou JOIN inventory_node n ON n.id = ou.node_id ORDER BY 1"""


def pool_sums() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The pool sizes (their change rows summed) and the outages with their nodes' keys, as the
    triggers keep them."""
    return rows((_POOL_SIZES_SQL, {})), rows((_POOL_OUTAGES_SQL, {}))


def pool_sums_counted() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The same, counted from the nodes and outages."""
    return rows((_POOL_SIZES_COUNTED_SQL, {})), rows((_POOL_OUTAGES_COUNTED_SQL, {}))
