"""The history of leases and holds: their event rows and their only way to change status.

`lease_status_advance` and `hold_status_advance` move a locked row along its lifecycle map
(leasing.choices) and write one `status_changed` LeaseEvent in the same transaction;
`lease_event_record` writes the other rows of either history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from contracts.services import json_value
from core.events import emit_to
from core.lifecycle import StatusChange
from core.rows import insert
from leasing.choices import HOLD_LIFECYCLE, LEASE_LIFECYCLE, LeaseEventKind, LeaseStatus
from leasing.hooks import lease_hooks_run
from leasing.models import Hold, Lease, LeaseEvent, Offer


def _inputs(values: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: json_value(value) for key, value in (values or {}).items()}


def _webhook_type(kind: str, to_status: str) -> str | None:
    """The webhook event a row of a lease's history is, if any."""
    if kind == LeaseEventKind.CREATED:
        return "lease.created"
    if kind == LeaseEventKind.PREEMPTED:
        return "lease.preempted"
    if kind == LeaseEventKind.STATUS_CHANGED and to_status == LeaseStatus.ACTIVE:
        return "lease.started"
    if kind == LeaseEventKind.STATUS_CHANGED and to_status in (
        LeaseStatus.ENDED,
        LeaseStatus.CANCELLED,
    ):
        return "lease.ended"
    return None


def _lease_webhook(event: LeaseEvent, lease: Lease) -> None:
    """The outbox event of a history row, for the customer and the offer's provider."""
    event_type = _webhook_type(event.kind, event.to_status)
    if event_type is None:
        return
    provider_id = (
        lease.offer.provider_id
        if Lease.offer.is_cached(lease)
        else Offer.objects.filter(pk=lease.offer_id).values_list("provider_id", flat=True)[0]
    )
    data: dict[str, Any] = {
        "lease_id": lease.pk,
        "contract_id": lease.contract_id,
        "status": lease.status,
        "gpu_count": lease.gpu_count,
        "start": lease.start,
        "end": lease.end,
        "pricing_mode": lease.pricing_mode,
        "explanation": event.explanation,
    }
    if event.kind == LeaseEventKind.STATUS_CHANGED:
        data["from_status"] = event.from_status
        data["ended_at"] = lease.ended_at
    if event.kind == LeaseEventKind.PREEMPTED:
        data["notice"] = event.inputs
    emit_to(
        [lease.customer_id, provider_id],
        type=event_type,
        data=data,
        occurred_at=event.effective_at,
    )


def lease_event_record(
    owner: Lease | Hold,
    *,
    kind: str,
    effective_at: datetime,
    explanation: str,
    actor: str,
    inputs: Mapping[str, Any] | None = None,
    from_status: str = "",
    to_status: str = "",
) -> LeaseEvent:
    """Write one row (a LeaseEvent) of a lease's or a hold's history; a lease's row is also its
    webhook event, in the same transaction."""
    lease, hold = (owner, None) if isinstance(owner, Lease) else (None, owner)
    event = insert(
        LeaseEvent(
            lease=lease,
            hold=hold,
            kind=kind,
            effective_at=effective_at,
            explanation=explanation,
            actor=actor,
            inputs=_inputs(inputs),
            from_status=from_status,
            to_status=to_status,
        )
    )
    if lease is not None:
        _lease_webhook(event, lease)
    return event


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
    lease_event_record(
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
    if to_status in (LeaseStatus.ENDED, LeaseStatus.CANCELLED):
        lease_hooks_run("ended", lease, at)
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
