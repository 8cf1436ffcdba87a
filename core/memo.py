"""A memo for one unit of batch work: lookups answered once per batch, not once per document.

The billing cycle bills a batch of contracts in one transaction; each invoice's issue looks up
the same ledger accounts, commission rates, number sequence and grants. Inside `batch_memo()`
those lookups keep their answer for the rest of the batch (`memoized`); outside one (an API
request, an admin action) they run every time. Only lookups whose answer cannot change within
the batch's transaction, or that the batch itself holds locked, are memoized; a batch that rolls
back a part of its work starts a new memo.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_memo: ContextVar[dict[Hashable, Any] | None] = ContextVar("batch_memo", default=None)


@contextmanager
def batch_memo() -> Iterator[None]:
    """Memoize `memoized` lookups until the block ends."""
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def memoized(key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()` once per batch for this key; every time outside a batch."""
    memo = _memo.get()
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def remember(key: Hashable, value: Any) -> None:
    """Give a batch's memo an answer read in bulk beforehand (no-op outside a batch)."""
    memo = _memo.get()
    if memo is not None:
        memo.setdefault(key, value)
