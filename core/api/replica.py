"""Which GET handlers may read from the read replica (core.db_routing), chosen view by view.

Decorate a handler with `reads_from_replica` (or mix `ReplicaListMixin` into a list view): its
reads go to the replica unless the caller's organization wrote recently, the primary is in a
transaction or the handler itself writes. Authentication, permissions and throttles run before
the handler, on the primary. Detail views, previews and every write stay on the primary; the
endpoints that read from the replica are listed in docs/scaling.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from rest_framework.request import Request

from core.db_routing import current_principal, replica_reads

Handler = TypeVar("Handler", bound=Callable[..., Any])


def reads_from_replica(handler: Handler) -> Handler:
    """Run a view's GET handler in a `replica_reads` scope (lists and reports only)."""

    @functools.wraps(handler)
    def wrapped(view: Any, request: Request, *args: Any, **kwargs: Any) -> Any:
        if request.method not in ("GET", "HEAD"):
            return handler(view, request, *args, **kwargs)
        with replica_reads(principal=current_principal()):
            return handler(view, request, *args, **kwargs)

    wrapped.reads_from_replica = True  # type: ignore[attr-defined]
    return cast(Handler, wrapped)


class ReplicaListMixin:
    """A list view whose `list` reads from the replica (its detail view stays on the primary)."""

    @reads_from_replica
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        return super().list(request, *args, **kwargs)  # type: ignore[misc]
