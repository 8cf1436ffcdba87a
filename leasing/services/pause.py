"""Pausing a customer's interruptible leases when its money policy says so.

A prepaid balance that is about to run out, or a budget spent to its limit with the action
"pause", stops the customer's interruptible capacity — the only capacity the marketplace may
take back without breaking a commitment. Billing and economics decide *when* (they sit above
leasing and call this); leasing decides *how*: the same cut as a preemption. The live
allocations are cut at `now` (ones not yet begun are released), the lease ends there, its
contract ends with the reason `paused`, and the lease and contract histories say why in a
sentence. Nothing is deleted; the lease's `lease.ended` webhook carries the explanation.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from accounts.models import Organization
from contracts.choices import ContractStatus, EndReason, EventKind
from contracts.services import contract_transition, event_record
from core.text import counted
from leasing.choices import LIVE_LEASE_STATUSES, AllocationEnd, LeaseEventKind, PricingMode
from leasing.locks import lease_lock
from leasing.models import Lease
from leasing.services.ending import allocations_cut, lease_sync_status, live_allocations_lock
from leasing.services.history import lease_event_record


def interruptible_leases_pause(
    *,
    customer: Organization,
    reason: str,
    actor: str,
    now: datetime,
    tags: dict[str, str] | None = None,
) -> int:
    """Cut the customer's live interruptible leases at `now` (only those carrying every one of
    `tags`, when given); returns how many were paused.

    One transaction per lease, each re-checked under its lock, so a rerun (or a race with the
    lease's own end) pauses nothing twice.
    """
    lease_ids = Lease.objects.filter(
        customer=customer,
        pricing_mode=PricingMode.INTERRUPTIBLE,
        status__in=LIVE_LEASE_STATUSES,
        end__gt=now,
    ).order_by("pk")
    if tags:
        lease_ids = lease_ids.filter(tags__contains=tags)
    paused = 0
    for lease_id in lease_ids.values_list("pk", flat=True):
        with transaction.atomic():
            lease = lease_lock(lease_id)
            if lease.status not in LIVE_LEASE_STATUSES or lease.end <= now:
                continue
            _lease_pause(lease, reason=reason, actor=actor, now=now)
            paused += 1
    return paused


def _lease_pause(lease: Lease, *, reason: str, actor: str, now: datetime) -> None:
    """Cut a locked live lease at `now`, end it and its contract, and write both histories."""
    live = live_allocations_lock(lease)
    allocations_cut(live, at=now, reason=AllocationEnd.PAUSED, now=now)
    old_end = lease.end
    ends_at = max(now, lease.start)  # paused before it began, it never ran: it ends at its start
    if now > lease.start:
        lease.end = now
        lease.save(update_fields=["end", "updated_at"])
    explanation = (
        f"Paused at {now:%Y-%m-%d %H:%M} UTC by the customer's money policy: {reason}. "
        f"{counted(len(live), 'interruptible GPU')} stopped; billing stops at "
        f"{ends_at:%Y-%m-%d %H:%M} UTC instead of {old_end:%Y-%m-%d %H:%M} UTC. "
        "Nothing was deleted; a new lease can be taken once the money policy allows it."
    )
    inputs = {
        "reason": reason,
        "paused_at": now,
        "old_end": old_end,
        "ends_at": ends_at,
        "gpus_stopped": len(live),
        "contract": lease.contract.number,
    }
    contract = lease.contract
    event_record(
        contract,
        kind=EventKind.PAUSED,
        effective_at=ends_at,
        explanation=explanation,
        actor=actor,
        inputs=inputs,
    )
    lease_event_record(
        lease,
        kind=LeaseEventKind.PAUSED,
        effective_at=now,
        explanation=explanation,
        actor=actor,
        inputs=inputs,
    )
    if contract.status != ContractStatus.ENDED:
        lease.contract = contract_transition(
            contract=contract,
            to_status=ContractStatus.ENDED,
            end_reason=EndReason.PAUSED,
            at=ends_at,
            actor=actor,
            reason=f"lease {lease.pk} was paused by the customer's money policy: {reason}",
        )
    lease_sync_status(lease, actor=actor)
