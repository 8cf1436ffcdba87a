"""Which GET handlers may read from the read replica (core.db_routing), chosen view by view.

Decorate a handler with `reads_from_replica` (or mix `ReplicaListMixin` into a list view): its
reads go to the replica unless the caller's organization wrote recently, the primary is in a
transaction or the handler itself writes. Authentication, permissions and throttles run before
the handler, on the primary. When the replica cannot be reached the handler runs again on the
primary. Detail views, previews and every write stay on the primary; the endpoints that read
from the replica are listed in docs/scaling.md.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from rest_framework.request import Request

from core.db_routing import current_principal, replica_reads

logger = logging.getLogger(__name__)

Handler = TypeVar("Handler", bound=Callable[..., Any])


def reads_from_replica(handler: Handler) -> Handler:
    """Run a view's GET handler in a `replica_reads` scope (lists and reports only)."""

    @functools.wraps(handler)
    def wrapped(view: Any, request: Request, *args: Any, **kwargs: Any) -> Any:
        if request.method not in ("GET", "HEAD"):
            return handler(view, request, *args, **kwargs)
        alias = DEFAULT_DB_ALIAS
        try:
            with replica_reads(principal=current_principal()) as alias:
                return handler(view, request, *args, **kwargs)
        except OperationalError:
            if alias == DEFAULT_DB_ALIAS:
                raise
            # The replica is down or restarting: a read handler is safe to run again, on the
            # primary, so the caller gets its answer instead of an error.
            logger.warning("read replica %r unavailable; answering from the primary", alias)
            connections[alias].close_if_unusable_or_obsolete()
            return handler(view, request, *args, **kwargs)

    wrapped.reads_from_replica = True  # type: ignore[attr-defined]
    return cast(Handler, wrapped)


class ReplicaListMixin:
    """A list view whose `list` reads from the replica (its detail view stays on the primary)."""

    @reads_from_replica
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        return super().list(request, *args, **kwargs)  # type: ignore[misc]
