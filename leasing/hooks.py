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
from leasing.models import Lease, ResaleListing

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


# Resale (docs/architecture.md, "Resale"): billing registers these to split the buyer's money and
# to refund a sublease cut short. "sold": a listing became a sublease (listing.sublease is set;
# `at` is the sale). "parent_ended": the parent lease's early end reached a sold window and the
# listing's `on_parent_end` was applied (`at` is the parent's new end; for "end_with_refund" the
# sublease now ends there, for "continue_under_provider" it runs on as top-level allocations).
SubleaseHookEvent = Literal["sold", "parent_ended"]
SubleaseHook = Callable[[ResaleListing, datetime], Any]  # what a hook returns is ignored

_sublease_hooks: dict[SubleaseHookEvent, Registry[SubleaseHook]] = {
    "sold": Registry(),
    "parent_ended": Registry(),
}


def sublease_hook_register(event: SubleaseHookEvent, name: str, hook: SubleaseHook) -> None:
    """Register (or replace) the sublease hook called `name` for `event` (from `ready()`)."""
    _sublease_hooks[event].register(name, hook)


def sublease_hooks_run(event: SubleaseHookEvent, listing: ResaleListing, at: datetime) -> None:
    """Run every sublease hook registered for `event`, in registration order."""
    for hook in _sublease_hooks[event].snapshot():
        hook(listing, at)
