"""Reads of lists and reports from a streaming read replica; everything else on the primary.

The replica is opt-in twice: the deployment names one (`DATABASE_REPLICA_URL` gives the
database alias `replica`, settings.DATABASE_READ_REPLICA), and a view says which of its GET
handlers may read from it (`core.api.replica.reads_from_replica`). Reads go to the replica
only inside such a handler (the `replica_reads` scope), and not even there when:

- the caller's organization wrote in the last DATABASE_REPLICA_PIN_SECONDS (read-your-writes:
  every POST/PUT/PATCH/DELETE pins its organization to the primary for that long, recorded in
  the shared cache by core.middleware.ReadYourWritesMiddleware);
- the primary is inside a transaction (what it reads must be what it is about to write);
- the handler itself wrote (from its first write on, it reads its own writes from the primary).

Writes always go to the primary; Celery tasks, the admin, commands and every other view never
enter the scope, so they read the primary. Objects keep the database they came from, so related
rows of a page read from the replica come from the replica too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections

from core.logging import organization_var

_PIN_KEY = "cardhour:replica-pin:{principal}"


@dataclass
class _ReplicaScope:
    """The replica alias reads go to in this scope, until the scope writes."""

    alias: str
    wrote: bool = False


_scope: ContextVar[_ReplicaScope | None] = ContextVar("cardhour_replica_scope", default=None)


def replica_alias() -> str | None:
    """The alias of the read replica, or None when the deployment has none."""
    alias: str | None = getattr(settings, "DATABASE_READ_REPLICA", None)
    return alias or None


def current_principal() -> str | None:
    """Whose writes pin reads to the primary: the organization this request acts for."""
    slug = organization_var.get()
    return f"org:{slug}" if slug else None


def writes_pin(*, principal: str) -> None:
    """Send `principal`'s reads to the primary for DATABASE_REPLICA_PIN_SECONDS (it just wrote)."""
    if replica_alias() is None:
        return
    seconds = settings.DATABASE_REPLICA_PIN_SECONDS
    cache.set(_PIN_KEY.format(principal=principal), 1, timeout=seconds)


def recently_wrote(*, principal: str) -> bool:
    """True while `principal` is pinned to the primary by a recent write."""
    return cache.get(_PIN_KEY.format(principal=principal)) is not None


def read_alias_for(*, principal: str | None) -> str:
    """The database a list or report of `principal` would read from now."""
    alias = replica_alias()
    if alias is None or principal is None:
        return DEFAULT_DB_ALIAS
    if connections[DEFAULT_DB_ALIAS].in_atomic_block or recently_wrote(principal=principal):
        return DEFAULT_DB_ALIAS
    return alias


@contextmanager
def replica_reads(*, principal: str | None) -> Iterator[str]:
    """Within this block reads go to the replica when `read_alias_for` allows; yields the alias."""
    alias = read_alias_for(principal=principal)
    if alias == DEFAULT_DB_ALIAS:
        yield alias
        return
    token = _scope.set(_ReplicaScope(alias=alias))
    try:
        yield alias
    finally:
        _scope.reset(token)


class PrimaryReplicaRouter:
    """Routes reads inside a `replica_reads` scope to the replica, every write to the primary."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        scope = _scope.get()
        if scope is None:
            return None
        instance = hints.get("instance")
        if instance is not None and instance._state.db is not None:
            return str(instance._state.db)
        if scope.wrote or connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return DEFAULT_DB_ALIAS
        return scope.alias

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        scope = _scope.get()
        if scope is not None:
            scope.wrote = True
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        # The replica holds the primary's rows: an object read from either may point to the other.
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        # A streaming replica is read-only and receives the schema from the primary's WAL.
        return False if db != DEFAULT_DB_ALIAS else None
