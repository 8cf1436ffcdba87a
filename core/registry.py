"""A named registry: how a lower layer lets higher ones plug in without importing them.

Higher apps register a callable under a name from their `AppConfig.ready`; registering a name
again replaces it (so a reload or a test does not add a second copy). The lower layer runs the
callables in registration order over a snapshot, so a callable may register or remove another
without breaking the loop. Used by leasing/admission.py (checks) and leasing/hooks.py (hooks).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


class Registry(dict[str, T]):
    """Callables by name, in registration order."""

    def register(self, name: str, item: T) -> None:
        """Register (or replace) the item called `name`."""
        self[name] = item

    def snapshot(self) -> Iterator[T]:
        """The registered items in order, frozen before the first is run."""
        return iter(list(self.values()))
