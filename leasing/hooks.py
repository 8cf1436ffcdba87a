"""Lease hooks: what higher layers do, in the lease's own transaction, when a lease is made or
ends.

Leasing sits below billing (docs/architecture.md), yet a lease's deposit is billing's money: it
is held when the lease is made and released when it ends (docs/ledger.md, "Deposits"). Billing
registers a hook here from its `AppConfig.ready`; `lease_create` runs the `created` hooks after
the lease and its contract exist, and every move of a lease to ended or cancelled runs the
`ended` hooks. A hook refuses by raising an `ApplicationError`: the whole lease creation rolls
back with it, so nothing is half-written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from core.registry import Registry
from leasing.models import Lease

LeaseHookEvent = Literal["created", "ended"]
LeaseHook = Callable[[Lease, datetime], Any]  # what a hook returns is ignored

_hooks: dict[LeaseHookEvent, Registry[LeaseHook]] = {"created": Registry(), "ended": Registry()}


def lease_hook_register(event: LeaseHookEvent, name: str, hook: LeaseHook) -> None:
    """Register (or replace) the hook called `name` for `event`; apps call this from `ready()`."""
    _hooks[event].register(name, hook)


def lease_hooks_run(event: LeaseHookEvent, lease: Lease, at: datetime) -> None:
    """Run every hook registered for `event`, in registration order."""
    for hook in _hooks[event].snapshot():
        hook(lease, at)
