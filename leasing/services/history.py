"""The history of leases and holds: their event rows and their only way to change status.

`lease_status_advance` and `hold_status_advance` move a locked row along its lifecycle map
(leasing.choices) and write one `status_changed` LeaseEvent in the same transaction;
`lease_event_record` and `hold_event_record` write the other rows of a history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from contracts.services import json_value
from core.lifecycle import StatusChange
from leasing.choices import HOLD_LIFECYCLE, LEASE_LIFECYCLE, LeaseEventKind
from leasing.models import Hold, Lease, LeaseEvent


def _inputs(values: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: json_value(value) for key, value in (values or {}).items()}


def history_event_record(
    subject: Lease | Hold,
    *,
    kind: str,
    effective_at: datetime,
    explanation: str,
    actor: str,
    inputs: Mapping[str, Any] | None = None,
    from_status: str = "",
    to_status: str = "",
) -> LeaseEvent:
    """Write one row of a lease's or a hold's history (exactly one of them, as the table holds)."""
    owner = {"lease": subject} if isinstance(subject, Lease) else {"hold": subject}
    return LeaseEvent.objects.create(
        **owner,
        kind=kind,
        effective_at=effective_at,
        explanation=explanation,
        actor=actor,
        inputs=_inputs(inputs),
        from_status=from_status,
        to_status=to_status,
    )


# The names the use cases call: one writer for both.
lease_event_record = history_event_record
hold_event_record = history_event_record


def _status_sentence(change: StatusChange) -> str:
    return f"Status changed from {change.from_status} to {change.to_status}: {change.reason}"


def _lease_status_event_write(lease: Lease, change: StatusChange) -> None:
    """The lease lifecycle's event writer."""
    lease_event_record(
        lease,
        kind=LeaseEventKind.STATUS_CHANGED,
        effective_at=change.at,
        explanation=_status_sentence(change),
        actor=change.actor,
        inputs=change.inputs,
        from_status=change.from_status,
        to_status=change.to_status,
    )


def _hold_status_event_write(hold: Hold, change: StatusChange) -> None:
    """The hold lifecycle's event writer."""
    hold_event_record(
        hold,
        kind=LeaseEventKind.STATUS_CHANGED,
        effective_at=change.at,
        explanation=_status_sentence(change),
        actor=change.actor,
        inputs=change.inputs,
        from_status=change.from_status,
        to_status=change.to_status,
    )


def lease_status_advance(
    lease: Lease,
    *,
    to_status: str,
    at: datetime,
    actor: str,
    reason: str,
    inputs: Mapping[str, Any] | None = None,
    update_fields: Sequence[str] = (),
) -> Lease:
    """Move a locked lease along its lifecycle map, saving `update_fields` with the status."""
    LEASE_LIFECYCLE.advance(
        lease,
        to=to_status,
        at=at,
        actor=actor,
        reason=reason,
        record=_lease_status_event_write,
        update_fields=update_fields,
        inputs=inputs,
    )
    return lease


def hold_status_advance(
    hold: Hold,
    *,
    to_status: str,
    at: datetime,
    actor: str,
    reason: str,
    inputs: Mapping[str, Any] | None = None,
) -> Hold:
    """Move a locked hold along its lifecycle map."""
    HOLD_LIFECYCLE.advance(
        hold,
        to=to_status,
        at=at,
        actor=actor,
        reason=reason,
        record=_hold_status_event_write,
        inputs=inputs,
    )
    return hold
