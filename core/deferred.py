"""Inserts deferred to the end of a unit of batch work: one INSERT per table, not one per row.

The billing cycle issues a batch of invoices in one transaction; each invoice writes the same
rows (the invoice, its lines, its event, its commission charge, its ledger posting, its outbox
events), and one statement per row is most of a batch's time. Inside `batch_writes()` the
writers hand their new rows to `insert` / `insert_many`, which keep them in memory, and
`writes_flush()` inserts them table by table, each after the tables it points to, one
`bulk_create` per table, before the batch records what it committed. Outside a batch (an API
request, an admin action) the rows are inserted at once. Whatever writes a row pointing at a
waiting one, or reads rows a writer may have deferred, flushes first (a balance draw, a resale
split).

Rows that other rows point to before the flush take their primary key from the table's sequence
up front (`reserve_pk`, one query per POOL keys). A deferred row later saved with `update_fields`
(an invoice moving from draft to finalized) is not updated: it is inserted with its final
values (`pending`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)

# Keys taken from a table's sequence per query; unused ones are gaps, as rolled-back inserts leave.
POOL = 200


@dataclass
class _Writes:
    """The rows waiting for the flush, by table in first-written order; the reserved keys."""

    rows: dict[type[models.Model], list[models.Model]] = field(default_factory=dict)
    order: dict[type[models.Model], Callable[[Any], Any]] = field(default_factory=dict)
    waiting: set[int] = field(default_factory=set)
    updates: dict[int, tuple[models.Model, set[str]]] = field(default_factory=dict)
    keys: dict[type[models.Model], list[int]] = field(default_factory=dict)


_writes: ContextVar[_Writes | None] = ContextVar("batch_writes", default=None)


class UnflushedWrites(RuntimeError):
    """A batch ended normally with rows or updates never flushed: they would be lost."""


@contextmanager
def batch_writes() -> Iterator[None]:
    """Defer `insert` / `insert_many` rows until `writes_flush()`; the caller flushes before its
    transaction commits. A block ending in an exception drops what waits, with its transaction;
    one ending normally with anything still waiting raises UnflushedWrites (inside the caller's
    transaction, which then rolls back) instead of losing it."""
    writes = _Writes()
    token = _writes.set(writes)
    try:
        yield
    finally:
        _writes.reset(token)
    if writes.rows or writes.updates:
        waiting = ", ".join(
            f"{len(rows)} {model._meta.label}" for model, rows in writes.rows.items() if rows
        )
        raise UnflushedWrites(
            f"batch_writes() ended with writes never flushed ({waiting or 'updates'}): "
            "call writes_flush() before the batch's end"
        )


def reserve_pk(obj: M) -> M:
    """Give a new row its primary key now (from the table's sequence) in a batch; else no-op."""
    writes = _writes.get()
    if writes is None or obj.pk is not None:
        return obj
    model = type(obj)
    pool = writes.keys.setdefault(model, [])
    if not pool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [model._meta.db_table, model._meta.pk.column, POOL],
            )
            pool.extend(sorted((key for (key,) in cursor.fetchall()), reverse=True))
    obj.pk = pool.pop()
    return obj


def insert(obj: M) -> M:
    """Insert one new row: now, or at the batch's flush."""
    writes = _writes.get()
    if writes is None:
        obj.save(force_insert=True)
        return obj
    writes.rows.setdefault(type(obj), []).append(obj)
    writes.waiting.add(id(obj))
    return obj


def insert_many(
    model: type[M], objs: Iterable[M], *, order: Callable[[M], Any] | None = None
) -> list[M]:
    """Insert new rows of one table: now (one INSERT), or at the batch's flush.

    `order`: the order the batch's rows of this table go in at the flush (e.g. ledger entries by
    account, so that concurrent batches lock account rows in the same order).
    """
    writes = _writes.get()
    if writes is None:
        return model._default_manager.bulk_create(objs)
    rows = list(objs)
    writes.rows.setdefault(model, []).extend(rows)
    writes.waiting.update(id(obj) for obj in rows)
    if order is not None:
        writes.order[model] = order
    return rows


def update(obj: models.Model, *, fields: Iterable[str]) -> None:
    """Save these fields of an existing row: now, or once at the batch's flush (a row the batch
    holds locked and changes many times, e.g. a number sequence, is updated once)."""
    writes = _writes.get()
    if writes is None:
        obj.save(update_fields=list(fields))
        return
    _, known = writes.updates.setdefault(id(obj), (obj, set()))
    known.update(fields)


def batching() -> bool:
    """Whether a batch defers the writes (per-row log lines go to DEBUG: the batch logs its own)."""
    return _writes.get() is not None


def pending(obj: models.Model) -> bool:
    """Whether the row waits for the batch's flush (its later changes go in with it)."""
    writes = _writes.get()
    return writes is not None and id(obj) in writes.waiting


def _parents_first(tables: list[type[models.Model]]) -> list[type[models.Model]]:
    """The tables in first-written order, each after the waiting tables it points to (foreign
    keys are checked at each INSERT)."""
    ordered: list[type[models.Model]] = []

    def visit(model: type[models.Model], path: set[type[models.Model]]) -> None:
        if model in ordered:
            return
        for column in model._meta.concrete_fields:
            parent = column.related_model if column.is_relation else None
            if parent in tables and parent not in path and isinstance(parent, type):
                visit(parent, path | {parent})
        ordered.append(model)

    for model in tables:
        visit(model, {model})
    return ordered


def writes_flush() -> None:
    """Insert the waiting rows, one INSERT per table, parents first, then save the deferred
    updates; no-op outside a batch."""
    writes = _writes.get()
    if writes is None:
        return
    for model in _parents_first(list(writes.rows)):
        rows = writes.rows[model]
        order = writes.order.get(model)
        model._default_manager.bulk_create(sorted(rows, key=order) if order is not None else rows)
    for obj, fields in writes.updates.values():
        obj.save(update_fields=sorted(fields))
    writes.rows.clear()
    writes.waiting.clear()
    writes.updates.clear()
