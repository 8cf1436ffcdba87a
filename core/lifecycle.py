"""Status lifecycles: one allowed-transition map, one guard and one audit row per change.

Every model with a status (contracts, leases, holds, invoices) declares a `Lifecycle` beside its
choices and changes its status only through `Lifecycle.advance`, inside the transaction of the
use case that causes the change. `advance` refuses a move the map does not allow, saves the new
status with the fields the caller changed alongside it, and hands a `StatusChange` to the
entity's event writer, so the audit row is written in the same transaction as the change or not
at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.db import connection, models

from core.deferred import pending
from core.errors import Conflict

M = TypeVar("M", bound=models.Model)


class TransitionNotAllowed(Conflict):
    """The status change is not in the entity's lifecycle map (409)."""

    code = "transition_not_allowed"


@dataclass(frozen=True, slots=True)
class StatusChange:
    """One move along a lifecycle, as its audit row records it."""

    entity: str
    from_status: str
    to_status: str
    at: datetime
    actor: str
    reason: str
    # The facts behind the move (an end reason, the contract's status ...) for the row's inputs.
    inputs: Mapping[str, Any] = field(default_factory=dict)


EventWriter = Callable[[Any, StatusChange], object]


class Lifecycle(Generic[M]):
    """The allowed transitions of one model's status field, and the only way to change it."""

    def __init__(
        self,
        entity: str,
        transitions: Mapping[str, frozenset[str]],
        *,
        field: str = "status",
        error_code: str = TransitionNotAllowed.code,
    ) -> None:
        targets = set().union(*transitions.values()) if transitions else set()
        unknown = targets - set(transitions)
        if unknown:
            raise ValueError(f"{entity} lifecycle: targets without an entry: {sorted(unknown)}")
        self.entity = entity
        self.transitions: Mapping[str, frozenset[str]] = {
            str(status): frozenset(str(target) for target in targets)
            for status, targets in transitions.items()
        }
        self.field = field
        self.error_code = error_code

    @property
    def statuses(self) -> frozenset[str]:
        """Every status the map knows."""
        return frozenset(self.transitions)

    @property
    def terminal(self) -> frozenset[str]:
        """Statuses with no way out."""
        return frozenset(status for status, targets in self.transitions.items() if not targets)

    def allows(self, from_status: str, to_status: str) -> bool:
        """Whether the map has the move."""
        return to_status in self.transitions.get(from_status, frozenset())

    def guard(self, from_status: str, to_status: str, *, label: str = "") -> None:
        """Raise TransitionNotAllowed (409, with the allowed targets) for a move off the map."""
        if self.allows(from_status, to_status):
            return
        allowed = sorted(self.transitions.get(from_status, frozenset()))
        subject = f"{self.entity} {label}".strip() if label else f"A {self.entity}"
        raise TransitionNotAllowed(
            f"{subject} cannot go from {from_status} to {to_status}.",
            code=self.error_code,
            detail={"from": from_status, "to": to_status, "allowed": allowed},
        )

    def advance(
        self,
        obj: M,
        *,
        to: str,
        at: datetime,
        actor: str,
        reason: str,
        record: EventWriter,
        update_fields: Iterable[str] = (),
        inputs: Mapping[str, Any] | None = None,
    ) -> StatusChange:
        """Move a locked row to `to`, save it with `update_fields`, and write its audit row.

        Must run inside the caller's transaction (the row is expected to be locked already);
        a move the map forbids raises before anything is written.
        """
        if not connection.in_atomic_block:
            raise RuntimeError(f"{self.entity} status changes run inside a transaction")
        from_status = str(getattr(obj, self.field))
        self.guard(from_status, to, label=str(obj.pk or ""))
        setattr(obj, self.field, to)
        fields = [self.field, *update_fields]
        if _has_field(obj, "updated_at") and "updated_at" not in fields:
            fields.append("updated_at")
        if not pending(obj):  # a row waiting for its batch's flush goes in with its new status
            obj.save(update_fields=list(dict.fromkeys(fields)))
        change = StatusChange(
            entity=self.entity,
            from_status=from_status,
            to_status=str(to),
            at=at,
            actor=actor,
            reason=reason,
            inputs=dict(inputs or {}),
        )
        record(obj, change)
        return change


def _has_field(obj: models.Model, name: str) -> bool:
    return any(field.name == name for field in obj._meta.concrete_fields)
