"""Admission checks: rules of higher layers that may refuse an organization new leases and holds.

Leasing sits below billing and economics in the layering (docs/architecture.md), yet money
rules there decide whether a customer may take on more: a budget spent to 100 % with the
action "block", or a prepaid balance run dry under a "stop new leases" policy. Those apps
register a check here from their `AppConfig.ready`; `hold_create` and `lease_create` run every
registered check inside their transaction, before any GPU is placed, and so does `lease_extend`
(more time is more spend). A check refuses by raising
an `ApplicationError` (its code and message reach the client unchanged); it never deletes or
changes anything. Converting an existing hold into a lease is not a new commitment and is not
checked again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from accounts.models import Organization
from core.registry import Registry


@dataclass(frozen=True)
class Admission:
    """What is asked for: who, how many GPUs, in which pricing mode, when, and the cost tags
    the new hold or lease will carry (cleaned by core.tags; empty when it carries none)."""

    customer: Organization
    gpu_count: int
    pricing_mode: str
    now: datetime
    tags: dict[str, str] = field(default_factory=dict)


AdmissionCheck = Callable[[Admission], None]

_checks: Registry[AdmissionCheck] = Registry()


def admission_check_register(name: str, check: AdmissionCheck) -> None:
    """Register (or replace) the check called `name`; apps call this from `ready()`."""
    _checks.register(name, check)


def admit(admission: Admission) -> None:
    """Run every registered check; the first that refuses raises its error."""
    for check in _checks.snapshot():
        check(admission)
