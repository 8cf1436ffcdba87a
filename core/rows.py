"""Model instances from rows of fixed-shape SQL, and new rows written by one, as the ORM would.

For the few hot reads and writes of the request path that run plain SQL instead of compiling an
ORM statement on every request (docs/architecture.md, "Request path costs"). Reads: each column
of a full row goes through its field's database converters (JSON, ranges) exactly as the ORM's
read does, so the objects handed on hold the same values. Writes: `insert` is `Model.save()` of
a new row (signals, auto_now_add, each field's own database preparation) with its INSERT
written once per model.

`bulk_cursor` is the read side for statements returning many rows with timestamps: Django loads
every `timestamptz` through a Python subclass of psycopg's loader (to attach the connection's
time zone), about 5 µs a value, a second for the 190,000 timestamps the nightly economics job
reads at 10,000 nodes; psycopg's own loader (C, in psycopg[binary]) gives the same instants in
the session's time zone (UTC, USE_TZ), three times faster, registered on that one cursor only.

`large_statements` is the session side of the few statements that read the whole fleet
(capacity search, the nightly economics job): a transaction without JIT compilation and with
work_mem for their hashes and sorts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Model
from django.db.models.signals import post_save, pre_save
from psycopg.types.datetime import TimestamptzLoader

Converter = Callable[[Any, Any, Any], Any]
M = TypeVar("M", bound=Model)


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


@functools.cache
def _attnames(model: type[Model]) -> list[str]:
    return [field.attname for field in model._meta.concrete_fields]


def model_from_row(model: type[Model], values: Sequence[Any]) -> Any:
    """An instance from a row of all its concrete columns (`columns` order), converted."""
    converted = []
    for (column, converters), value in zip(_converters(model), values, strict=True):
        for convert in converters:
            value = convert(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, _attnames(model), converted)


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


@functools.cache
def _insert_sql(model: type[Model]) -> tuple[str, list[Any]]:
    """The INSERT of a new row of `model` (every concrete column but the serial primary key,
    returning it) and the fields it writes, in order."""
    meta = model._meta
    if meta.parents or meta.proxy or list(meta.db_returning_fields) != [meta.pk]:
        raise TypeError(f"{model.__name__}: insert() writes plain tables with a serial key only.")
    fields = [field for field in meta.local_concrete_fields if field is not meta.auto_field]
    names = ", ".join(f'"{field.column}"' for field in fields)
    marks = ", ".join(["%s"] * len(fields))
    return (
        f'INSERT INTO "{meta.db_table}" ({names}) VALUES ({marks}) RETURNING "{meta.pk.column}"',
        fields,
    )


def insert(instance: M) -> M:
    """Save a new instance as `instance.save()` would — pre_save and post_save signals (history
    rows), auto_now_add, each field's own preparation of its value — in one fixed INSERT."""
    model = type(instance)
    sql, fields = _insert_sql(model)
    alias = connection.alias
    # Model.save()'s check of the related objects it points at (private, not in the stubs).
    cast(Any, instance)._prepare_related_fields_for_save(operation_name="save")
    pre_save.send(sender=model, instance=instance, raw=False, using=alias, update_fields=None)
    values = [
        field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields
    ]
    # As save(): an error here marks the enclosing atomic block for rollback.
    with transaction.mark_for_rollback_on_error(using=alias), connection.cursor() as cursor:
        cursor.execute(sql, values)
        (pk,) = cursor.fetchone()
    setattr(instance, model._meta.pk.attname, pk)
    instance._state.adding = False
    instance._state.db = alias
    post_save.send(
        sender=model, instance=instance, created=True, update_fields=None, raw=False, using=alias
    )
    return instance


def insert_many(instances: Sequence[M]) -> list[M]:
    """Save new instances of one model as `bulk_create` would (no signals; auto_now_add, each
    field's own preparation of its value), in one INSERT whose text depends only on how many."""
    if not instances:
        return []
    model = type(instances[0])
    sql, fields = _insert_sql(model)
    head, _, tail = sql.partition(" VALUES ")
    row_marks, _, returning = tail.partition(" RETURNING ")
    values: list[Any] = []
    for instance in instances:
        values.extend(
            field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields
        )
    statement = f"{head} VALUES {', '.join([row_marks] * len(instances))} RETURNING {returning}"
    alias = connection.alias
    with transaction.mark_for_rollback_on_error(using=alias), connection.cursor() as cursor:
        cursor.execute(statement, values)
        keys = [pk for (pk,) in cursor.fetchall()]
    for instance, pk in zip(instances, keys, strict=True):
        setattr(instance, model._meta.pk.attname, pk)
        instance._state.adding = False
        instance._state.db = alias
    return list(instances)


@contextmanager
def bulk_cursor() -> Iterator[CursorWrapper]:
    """A cursor of the default connection that loads timestamps with psycopg's own loader."""
    with connection.cursor() as cursor:
        cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        yield cursor


@contextmanager
def large_statements(*, work_mem: str = "64MB") -> Iterator[None]:
    """A transaction (a savepoint within the caller's) for statements over the whole fleet.

    PostgreSQL compiles a statement with its JIT once the planner's cost estimate passes
    jit_above_cost; for these few large statements (capacity search, the nightly economics job)
    compiling costs more than it saves (about 0.9 s of a 1.5 s statement of the economics job at
    10,000 nodes), and their hashes and sorts must not spill to disk at the default work_mem.
    Both settings are local to the transaction (set_config(..., true) is SET LOCAL): gone at its
    end, or kept to the end of the caller's transaction when nested.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('jit', 'off', true), set_config('work_mem', %s, true)", [work_mem]
        )
        yield
