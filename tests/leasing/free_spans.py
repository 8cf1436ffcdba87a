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
