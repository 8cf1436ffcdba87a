"""Model instances from rows of fixed-shape SQL, as the ORM would build them.

For the few hot reads of the request path that run plain SQL instead of compiling an ORM
statement on every request (docs/architecture.md, "Request path costs"): each column of a full
row goes through its field's database converters (JSON, ranges) exactly as the ORM's read does,
so the objects handed on hold the same values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connection
from django.db.models import Model

Converter = Callable[[Any, Any, Any], Any]


def columns(model: type[Model], alias: str) -> str:
    """Every concrete column of `model` under `alias`, in field order (for `model_from_row`)."""
    return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)


def width(model: type[Model]) -> int:
    """How many columns `columns(model, ...)` selects."""
    return len(model._meta.concrete_fields)


@functools.cache
def _converters(model: type[Model]) -> list[tuple[Any, list[Converter]]]:
    """Each concrete field's column expression and its database converters."""
    found = []
    for field in model._meta.concrete_fields:
        column = field.get_col(model._meta.db_table)
        converters = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        found.append((column, converters))
    return found


def model_from_row(model: type[Model], values: Sequence[Any]) -> Any:
    """An instance from a row of all its concrete columns (`columns` order), converted."""
    converted = []
    for (column, converters), value in zip(_converters(model), values, strict=True):
        for convert in converters:
            value = convert(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, None, converted)


def model_partial(model: type[Model], names: list[str], values: Sequence[Any]) -> Any:
    """An instance with only these columns (needing no converter) loaded, the rest deferred."""
    return model.from_db(connection.alias, names, list(values))


def prefetched(instance: Model, name: str, rows: list[Any]) -> None:
    """Store rows as `instance.<name>.all()` (a reverse or many-to-many relation), as
    prefetch_related would."""
    queryset = getattr(instance, name).all()
    queryset._result_cache = rows
    queryset._prefetch_done = True
    cache = getattr(instance, "_prefetched_objects_cache", None)
    if cache is None:
        cache = instance._prefetched_objects_cache = {}  # type: ignore[attr-defined]
    cache[name] = queryset
