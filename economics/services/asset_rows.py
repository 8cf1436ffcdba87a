"""Writing asset-month and payback rows in bulk, for the nightly job.

Writes go through COPY into a staging table and one INSERT ... ON CONFLICT DO UPDATE per table
that touches only rows whose values changed (`computed_at` aside), so a rerun over unchanged
inputs writes nothing and `computed_at` says when a month's figures last changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any

from django.db import connection
from django.db.models import Model
from psycopg.types.json import Jsonb

from economics.models import AssetMonth, AssetPayback


def _copy_upsert(cursor: Any, model: type[Model], rows: Iterable[Model], key: Sequence[str]) -> int:
    """COPY rows into a staging table, then insert or update the ones that changed."""
    table = model._meta.db_table
    fields = [f for f in model._meta.concrete_fields if f.name != "id"]
    columns = [str(f.column) for f in fields]
    json_columns = {f.column for f in fields if f.get_internal_type() == "JSONField"}
    stage = f"stage_{table}"
    cursor.execute(
        f"DROP TABLE IF EXISTS {stage};"
        f" CREATE TEMP TABLE {stage} (LIKE {table}) ON COMMIT DROP;"
        f" ALTER TABLE {stage} DROP COLUMN id"
    )
    listed = ", ".join(columns)
    with cursor.copy(f"COPY {stage} ({listed}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(
                [
                    Jsonb(getattr(row, f.attname))
                    if f.column in json_columns
                    else getattr(row, f.attname)
                    for f in fields
                ]
            )
    updated = [c for c in columns if c not in key]
    compared = [c for c in updated if c != "computed_at"]
    cursor.execute(
        f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {stage}"
        f" ORDER BY {', '.join(key)} ON CONFLICT ({', '.join(key)}) DO UPDATE SET "
        + ", ".join(f"{c} = EXCLUDED.{c}" for c in updated)
        + f" WHERE ({', '.join(f'{table}.{c}' for c in compared)})"
        f" IS DISTINCT FROM ({', '.join(f'EXCLUDED.{c}' for c in compared)})"
    )
    written: int = cursor.rowcount
    return written


def asset_rows_write(
    *,
    months: Iterable[AssetMonth],
    paybacks: Iterable[AssetPayback],
    stale: Sequence[tuple[int, date]],
) -> int:
    """Write changed months and paybacks, delete months no longer computed; months written.

    Call inside the job's transaction (the staging tables go with it).
    """
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        written = _copy_upsert(cursor, AssetMonth, months, ("node_id", "month"))
        _copy_upsert(cursor, AssetPayback, paybacks, ("node_id",))
        if stale:
            cursor.execute(
                "DELETE FROM billing_assetmonth t USING unnest(%s::bigint[], %s::date[])"
                " AS s(node_id, month) WHERE t.node_id = s.node_id AND t.month = s.month",
                [[node for node, _ in stale], [month for _, month in stale]],
            )
    return written
