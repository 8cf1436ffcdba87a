"""What resold GPU-time does when its parent lease changes: closing unsold listings, following
the assignment clause's `on_parent_end` when the parent ends early, and refusing a change that
would take sold time away (`resold_time`, 409).

Runs inside the parent's change (lease_cut_short, for every early end; lease_replace_gpu), under
the parent lease's lock.
The order matters to the database: nested rows are cut or detached before the parent's own rows
shrink (the trigger `allocation_nested_within_parent` refuses a parent shrinking below a live
nested row), and detached rows become top-level only after the parent's rows are cut (the
exclusion constraint `allocation_no_double_booking` refuses overlapping top-level rows).
"""

from __future__ import annotations

from datetime import datetime

from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from contracts import engine
from contracts.choices import ContractStatus, EndReason, EventKind
from contracts.services import contract_amend, contract_transition, event_record
from core.events import emit_to
from core.text import counted
from inventory.models import Gpu
from leasing.choices import (
    UNSOLD_RESALE_STATUSES,
    AllocationEnd,
    LeaseEventKind,
    OnParentEnd,
    ResaleStatus,
)
from leasing.hooks import sublease_hooks_run
from leasing.locks import allocations_lock, lease_lock, parent_listings_lock
from leasing.models import Allocation, Lease, ResaleListing
from leasing.services.history import lease_event_record


def nested_rows_lock(listing: ResaleListing) -> list[Allocation]:
    """Lock a listing's live nested allocations (its GPU-time, sold or not), in pk order."""
    return allocations_lock(
        Allocation.objects.filter(listing=listing, parent__isnull=False, released_at__isnull=True)
    )


def listing_close(
    listing: ResaleListing,
    *,
    lease: Lease,
    old_status: str,
    actor: str,
    now: datetime,
    reason: str,
) -> None:
    """Release a locked, unsold listing's GPU-time and record why (withdrawn or cancelled)."""
    rows = nested_rows_lock(listing)
    for row in rows:
        row.released_at = now
        row.ended_reason = AllocationEnd.RELEASED
        row.save(update_fields=["released_at", "ended_reason"])
    listing.closed_at = now
    listing.save(update_fields=["status", "closed_at"])
    lease_event_record(
        lease,
        kind=LeaseEventKind.RESALE_WITHDRAWN,
        effective_at=now,
        explanation=(
            f"Resale listing {listing.pk} {reason}; {counted(len(rows), 'GPU')} back in the "
            "lessee's own use."
        ),
        actor=actor,
        inputs={"listing_id": listing.pk, "from": old_status, "to": listing.status},
    )


def resold_time_guard(lease: Lease, *, gpu: Gpu, at: datetime) -> None:
    """Refuse (409 resold_time) a swap of a GPU whose time from `at` on is listed or sold, or a
    swap inside a sublease (its GPU-time is the seller's allocation)."""
    listed = Allocation.objects.filter(
        parent__lease=lease,
        parent__gpu=gpu,
        released_at__isnull=True,
        period__overlap=DateTimeTZRange(at, None, "[)"),
    )
    if lease.parent_lease_id is not None or listed.exists():
        raise engine.ResoldTime(
            "This GPU's time is listed or resold; it cannot be swapped out of the lease.",
            detail={"gpu_id": gpu.pk},
        )


def resale_follow_parent_end(
    lease: Lease, *, at: datetime, actor: str, now: datetime
) -> tuple[list[Allocation], list[Lease]]:
    """The locked parent lease will end at `at`: close its unsold listings that reach past it and
    apply each sold one's `on_parent_end`. Returns the top-level rows to insert once the
    parent's own rows are cut (continue_under_provider), unsaved, and the subleases whose
    contract ended (the caller moves their status: lease_sync_status)."""
    detached: list[Allocation] = []
    ended: list[Lease] = []
    listings = parent_listings_lock(
        ResaleListing.objects.filter(parent_lease=lease, end__gt=at).exclude(
            status__in=[ResaleStatus.WITHDRAWN, ResaleStatus.CANCELLED]
        )
    )
    for listing in listings:
        if listing.status in UNSOLD_RESALE_STATUSES:
            old = listing.status
            listing.status = ResaleStatus.CANCELLED
            listing_close(
                listing,
                lease=lease,
                old_status=old,
                actor=actor,
                now=now,
                reason="cancelled: the lease ends before its window does",
            )
            continue
        assert listing.sublease_id is not None  # sold (check constraint resale_sold_iff_sublease)
        sublease = lease_lock(listing.sublease_id)
        if listing.on_parent_end == OnParentEnd.CONTINUE_UNDER_PROVIDER:
            detached += _detach(listing, sublease=sublease, at=at, now=now)
            sentence = (
                f"The parent lease {lease.pk} ends {at:%Y-%m-%d %H:%M} UTC; under the assignment "
                "clause this sublease continues under the provider on the same GPUs."
            )
        else:
            if _end_with_parent(listing, sublease=sublease, at=at, actor=actor, now=now):
                ended.append(sublease)
            sentence = (
                f"The parent lease {lease.pk} ends {at:%Y-%m-%d %H:%M} UTC; under the assignment "
                "clause this sublease ends with it, and the time it loses is refunded."
            )
        inputs = {"listing_id": listing.pk, "parent_lease_id": lease.pk, "parent_end": at}
        inputs["rule"] = listing.on_parent_end
        lease_event_record(
            sublease,
            kind=LeaseEventKind.PARENT_ENDED,
            effective_at=now,
            explanation=sentence,
            actor=actor,
            inputs=inputs,
        )
        recorded = event_record(
            sublease.contract,
            kind=EventKind.RESALE,
            effective_at=at,
            explanation=sentence,
            actor=actor,
            inputs=inputs,
            dedupe_key=f"resale:{listing.pk}:parent_end",
        )
        if recorded is not None:  # told once per listing, however often its parent's end runs
            _sublease_ended_emit(listing, sublease=sublease, parent=lease, at=at, sentence=sentence)
        sublease_hooks_run("parent_ended", listing, at)
    return detached, ended


def _sublease_ended_emit(
    listing: ResaleListing, *, sublease: Lease, parent: Lease, at: datetime, sentence: str
) -> None:
    """`sublease.ended` for the buyer and the seller: the sublease no longer stands on the
    seller's lease (it ended with it, or runs on under the provider)."""
    emit_to(
        [sublease.customer_id, listing.seller_id],
        type="sublease.ended",
        data={
            "listing_id": listing.pk,
            "sublease_id": sublease.pk,
            "contract_id": sublease.contract_id,
            "parent_lease_id": parent.pk,
            "rule": listing.on_parent_end,
            "parent_end": at,
            "sublease_end": sublease.end,
            "explanation": sentence,
        },
        occurred_at=at,
    )


def _detach(
    listing: ResaleListing, *, sublease: Lease, at: datetime, now: datetime
) -> list[Allocation]:
    """Cut the sublease's nested rows at `at` (still inside the parent) and prepare top-level
    rows for the rest of each, on the same GPU, for the sublease."""
    pending = []
    for row in nested_rows_lock(listing):
        lower, upper = row.period.lower, row.period.upper
        if lower < at:
            row.period = DateTimeTZRange(lower, at, "[)")
            row.ended_reason = AllocationEnd.DETACHED
            row.save(update_fields=["period", "ended_reason"])
        else:
            row.released_at = now
            row.ended_reason = AllocationEnd.DETACHED
            row.save(update_fields=["released_at", "ended_reason"])
        pending.append(
            Allocation(
                gpu_id=row.gpu_id,
                node_id=row.node_id,
                lease=sublease,
                listing=listing,
                period=DateTimeTZRange(max(lower, at), upper, "[)"),
                replaces=row,
            )
        )
    return pending


def _end_with_parent(
    listing: ResaleListing, *, sublease: Lease, at: datetime, actor: str, now: datetime
) -> bool:
    """The sublease ends at the parent's new end: its GPU-time is cut there (or released when
    its window had not begun), its lease and contract end there. True when its contract ended
    now (nothing of it will run)."""
    for row in nested_rows_lock(listing):
        lower = row.period.lower
        if at <= lower:
            row.released_at = now
        else:
            row.period = DateTimeTZRange(lower, at, "[)")
        row.ended_reason = AllocationEnd.ENDED_EARLY
        row.save(update_fields=["period", "released_at", "ended_reason"])
    if sublease.contract.status == ContractStatus.ENDED:
        # Its contract ended meanwhile (the parent's end is applied late, e.g. by the job that
        # ends leases after an operator's termination): its lease stops at the parent's end,
        # and what was invoiced past it is billing's to refund (the "parent_ended" hook).
        if sublease.start < at < sublease.end:
            sublease.end = at
            sublease.save(update_fields=["end", "updated_at"])
        return False
    if at <= sublease.start:
        # Nothing of it will run: its contract ends now and the lease follows it (cancelled).
        contract_transition(
            contract=sublease.contract,
            to_status=ContractStatus.ENDED,
            actor=actor,
            reason=f"its parent lease ends {at:%Y-%m-%d %H:%M} UTC, before this sublease starts",
            end_reason=EndReason.TERMINATED,
            at=now,
        )
        return True
    sublease.end = at
    sublease.save(update_fields=["end", "updated_at"])
    contract_amend(contract=sublease.contract, changes={"term_end": at}, actor=actor)
    return False
