"""Words for sentences people read: one noun per count ("1 GPU", "2 GPUs"). Pure; no Django."""

from __future__ import annotations

from decimal import Decimal

# Nouns whose plural is not the singular plus "s".
_IRREGULAR = {"entry": "entries", "batch": "batches"}


def noun(count: int | Decimal, singular: str, plural: str | None = None) -> str:
    """The form of `singular` that agrees with `count`: singular only for exactly one."""
    if count == 1:
        return singular
    if plural is not None:
        return plural
    return _IRREGULAR.get(singular, f"{singular}s")


def counted(
    count: int | Decimal, singular: str, plural: str | None = None, *, shown: str | None = None
) -> str:
    """`count` and its noun: "1 month", "3 months"; `shown` is how to write the count."""
    return f"{shown if shown is not None else count} {noun(count, singular, plural)}"
