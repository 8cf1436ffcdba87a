"""How a lease stops: its status following its contract, its GPU-time cut short, and the one
rule for a lease that ends before its end (`lease_cut_short`).

Every path that ends a lease early goes through `lease_cut_short`: the lessee's exit
(`lease_exit`, at the exit's effective end) and a contract that ended before the lease's end —
an operator's termination, notice given on the contract itself, a rejection, a preemption or a
pause — which the lease follows in `lease_sync_status` (at the contract's `ended_at`). Resold
time of the lease follows the assignment clause there (leasing/services/resale_parent.py), so
no path can end a parent lease without its subleases hearing of it.
"""

from __future__ import annotations

from datetime import datetime

from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone

from contracts.choices import ContractStatus, EndReason
from leasing.choices import LIVE_LEASE_STATUSES, AllocationEnd, LeaseStatus
from leasing.locks import allocations_lock
from leasing.models import Allocation, Lease
from leasing.services.history import lease_status_advance
from leasing.services.resale_parent import resale_follow_parent_end

# ---------------------------------------------------------------- cutting allocations short


def allocations_cut(
    allocations: list[Allocation], *, at: datetime, reason: str, now: datetime
) -> None:
    """Cut locked allocations at `at`: ones that had not begun are released outright."""
    for allocation in allocations:
        lower, upper = allocation.period.lower, allocation.period.upper
        if at <= lower:
            allocation.released_at = now
            allocation.ended_reason = reason
            allocation.save(update_fields=["released_at", "ended_reason"])
        elif upper is None or at < upper:
            allocation.period = DateTimeTZRange(lower, at, "[)")
            allocation.ended_reason = reason
            allocation.save(update_fields=["period", "ended_reason"])


def live_allocations_lock(lease: Lease) -> list[Allocation]:
    """Lock a lease's live allocations (its own GPU-time), in pk order."""
    return allocations_lock(Allocation.objects.filter(lease=lease, released_at__isnull=True))


def lease_cut_short(lease: Lease, *, at: datetime, actor: str, now: datetime) -> None:
    """A locked lease ends at `at`, before its end: its resold time follows the assignment
    clause first (unsold listings past `at` close; sold ones continue under the provider or end
    with a refund), then its own GPU-time is cut there. Runs in the caller's transaction; a
    rerun finds nothing left to cut."""
    live = live_allocations_lock(lease)
    # Nested rows are cut or detached before the parent's own rows shrink (the trigger
    # allocation_nested_within_parent), and detached rows become top-level only after them
    # (the exclusion constraint allocation_no_double_booking).
    detached, ended = resale_follow_parent_end(lease, at=at, actor=actor, now=now)
    allocations_cut(live, at=at, reason=AllocationEnd.ENDED_EARLY, now=now)
    if detached:
        Allocation.objects.bulk_create(detached)
    for sublease in ended:
        sublease.contract.refresh_from_db()
        lease_sync_status(sublease, actor=actor)


def lease_sync_status(lease: Lease, *, actor: str) -> Lease:
    """Follow the contract of a locked lease: acceptance passed → active; contract ended →
    ended (cancelled when it was rejected at acceptance). Runs in the caller's transaction."""
    contract = lease.contract
    target = lease.status
    if contract.status in (ContractStatus.ACTIVE, ContractStatus.NOTICE_GIVEN):
        target = LeaseStatus.ACTIVE
    elif contract.status == ContractStatus.ENDED:
        target = (
            LeaseStatus.CANCELLED
            if contract.end_reason == EndReason.REJECTED_AT_ACCEPTANCE
            else LeaseStatus.ENDED
        )
    if target == lease.status:
        return lease
    if target == LeaseStatus.ACTIVE:
        at = contract.billing_start or timezone.now()
        return lease_status_advance(
            lease,
            to_status=target,
            at=at,
            actor=actor,
            reason=(
                f"contract {contract.number} is {contract.status}; "
                f"billing starts {at:%Y-%m-%d %H:%M} UTC"
            ),
            inputs={"contract_status": contract.status, "billing_start": contract.billing_start},
        )
    ended_at = contract.ended_at
    if ended_at is not None and ended_at < lease.end and lease.status in LIVE_LEASE_STATUSES:
        # The contract ended before the lease's end (terminated, exited on the contract, ...):
        # the lease is cut short there, its resold time following the assignment clause.
        lease_cut_short(lease, at=ended_at, actor=actor, now=timezone.now())
    lease.ended_at = ended_at
    return lease_status_advance(
        lease,
        to_status=target,
        at=contract.ended_at or timezone.now(),
        actor=actor,
        reason=f"contract {contract.number} ended ({contract.end_reason})",
        inputs={"contract_status": contract.status, "end_reason": contract.end_reason},
        update_fields=["ended_at"],
    )
