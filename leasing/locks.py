"""Row locks of the leasing app, each behind a name (the global order: docs/architecture.md).

Order within leasing: an organization's hold quota (advisory) → hold → lease → resale listing
(of that lease) → GPUs (pk order)
→ allocations (pk order), then the contract (contracts.locks). A hold or lease is locked FOR NO
KEY UPDATE: it serialises changes of that row, while rows that only point at it (its events,
allocations, preemption notices) can still be inserted by others, so a preemption that writes to
another lease's history never waits for that lease's lock. Offers and SLA offerings are locked
alone, never together with the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import QuerySet

from core.advisory import LockNamespace, advisory_xact_lock
from inventory.models import Gpu
from leasing.choices import HoldStatus
from leasing.models import Allocation, Hold, Lease, Offer, ResaleListing, SlaOffering


def hold_lock(hold: Hold | int) -> Hold:
    """Re-read one hold (with its offer and GPU model) under its row lock."""
    pk = hold if isinstance(hold, int) else hold.pk
    return (
        Hold.objects.select_for_update(no_key=True, of=("self",))
        .select_related("offer__gpu_model")
        .get(pk=pk)
    )


# The expired holds with a live allocation on some nodes overlapping a window, locked in pk order
# without waiting (expired_holds_lock with node_ids; the ORM statement it was, written once).
EXPIRED_HOLDS_IN_THE_WAY_SQL = f"""
SELECT h.id FROM {Hold._meta.db_table} h
WHERE h.status = %s AND h.expires_at <= %s AND h.id IN (
  SELECT a.hold_id FROM {Allocation._meta.db_table} a
  WHERE a.node_id = ANY(%s) AND a.hold_id IS NOT NULL AND a.released_at IS NULL
    AND a.period && %s)
ORDER BY h.id FOR NO KEY UPDATE SKIP LOCKED"""


def expired_holds_lock(
    *,
    now: datetime,
    node_ids: Sequence[int] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[Hold]:
    """Lock the active holds past their expiry, in pk order, skipping ones another transaction
    holds (it is converting or releasing them; the next sweep sees what is left).

    With `node_ids`, `start` and `end`: only those with a live allocation on these nodes that
    overlaps [start, end) (the ones in a placement's way).
    """
    if node_ids is not None:
        # A placement's look-up (it finds too few free GPUs): one fixed statement locks them;
        # the rows are read only when there are some (rarely: the beat task lapses them).
        with connection.cursor() as cursor:
            cursor.execute(
                EXPIRED_HOLDS_IN_THE_WAY_SQL,
                [HoldStatus.ACTIVE.value, now, list(node_ids), DateTimeTZRange(start, end, "[)")],
            )
            locked = [hold_id for (hold_id,) in cursor.fetchall()]
        return list(Hold.objects.filter(pk__in=locked).order_by("pk")) if locked else []
    holds = Hold.objects.filter(status=HoldStatus.ACTIVE, expires_at__lte=now)
    return list(holds.select_for_update(no_key=True, skip_locked=True).order_by("pk"))


def lease_lock(lease: Lease | int) -> Lease:
    """Re-read one lease (with its contract, offer, site and GPU model) under its row lock."""
    pk = lease if isinstance(lease, int) else lease.pk
    return (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("contract", "offer__gpu_model", "offer__site")
        .get(pk=pk)
    )


def resale_listing_lock(listing: ResaleListing | int) -> ResaleListing:
    """Re-read one resale listing under its row lock; taken after its parent lease's lock."""
    pk = listing if isinstance(listing, int) else listing.pk
    return ResaleListing.objects.select_for_update(no_key=True, of=("self",)).get(pk=pk)


def parent_listings_lock(listings: QuerySet[ResaleListing]) -> list[ResaleListing]:
    """Lock a parent lease's listings in pk order; taken after the parent lease's lock."""
    return list(listings.select_for_update(no_key=True, of=("self",)).order_by("pk"))


def gpus_lock(gpu_ids: Iterable[int]) -> list[int]:
    """Lock GPU rows in pk order, waiting for them; returns the ids locked."""
    return list(
        Gpu.objects.select_for_update()
        .filter(pk__in=sorted(set(gpu_ids)))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


# Appended to a free-GPU read (`g` is inventory_gpu) to claim its rows without waiting.
GPUS_SKIP_LOCKED = " FOR UPDATE OF g SKIP LOCKED"


def free_gpus_skip_locked(sql: str, params: Mapping[str, Any]) -> list[tuple[int, int]]:
    """Run a free-GPU read (`g` is inventory_gpu) locking its rows FOR UPDATE SKIP LOCKED.

    Placement's claim: a GPU another transaction is booking is left out instead of waited for,
    so the caller chooses again without it. Never waits, so it cannot take part in a deadlock.
    """
    with connection.cursor() as cursor:
        cursor.execute(sql + GPUS_SKIP_LOCKED, params)
        return [(gpu_id, node_id) for gpu_id, node_id in cursor.fetchall()]


def allocations_lock(allocations: QuerySet[Allocation]) -> list[Allocation]:
    """Lock the allocation rows of a queryset in pk order (after the GPUs they book)."""
    return list(allocations.select_for_update(of=("self",)).order_by("pk"))


def offer_lock(offer: Offer | int) -> Offer:
    """Re-read one offer (with its provider) under its row lock, for a change or a delete."""
    pk = offer if isinstance(offer, int) else offer.pk
    return Offer.objects.select_for_update(of=("self",)).select_related("provider").get(pk=pk)


def sla_offering_lock(offering: SlaOffering | int) -> SlaOffering:
    """Re-read one SLA offering (with its provider) under its row lock."""
    pk = offering if isinstance(offering, int) else offering.pk
    return SlaOffering.objects.select_for_update(of=("self",)).select_related("provider").get(pk=pk)


def organization_holds_lock(organization_id: int) -> None:
    """Serialise hold creation per organization until commit, so two requests cannot both pass
    its hold limits; a transaction-level advisory lock, taken before any row lock."""
    advisory_xact_lock(LockNamespace.HOLD_QUOTA, organization_id)
