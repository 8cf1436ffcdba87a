"""Allocation of specific GPUs to a hold or a lease, with no double booking.

The invariant: a GPU never has two live allocations whose periods overlap. It is held three
times over: candidate GPU rows are locked (FOR UPDATE SKIP LOCKED, in gpu-id order) and re-checked
in a fresh statement after the lock; an on-demand or reserved request may cut short only
preemptible (interruptible) allocations; and the database's exclusion constraint
`allocation_no_double_booking` refuses any overlap the code would still let through (it is
translated to a 409, never a 500).

Truly free GPUs are always used first; interruptible allocations are cut only when the request
cannot be met otherwise, and then the cut that costs least (leasing.preemption) is chosen.

Expired holds are lapsed by the beat task `leasing.expire_holds` (every minute), not on every
request; a request that finds too few GPUs lapses only the expired holds in its own way (pool and
window) and chooses again, so an expired hold never blocks a booking.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone

from core.rows import insert_many
from core.text import counted, noun
from inventory.models import Gpu, Node
from leasing.choices import AllocationEnd, HoldStatus
from leasing.errors import CapacityGone
from leasing.locks import allocations_lock, expired_holds_lock, free_gpus_skip_locked
from leasing.models import Allocation, Hold, Lease, Offer
from leasing.preemption import BookedSpan, Booking, CandidateGpu, cheapest_cut
from leasing.selectors.free import FREE_GPU_CONDITION, free_params
from leasing.services.history import hold_status_advance

SINGLE_NODE = "single_node"
# Each failed attempt rules out at least one GPU; past this many, report what is free now.
MAX_PLACEMENT_ATTEMPTS = 16
MULTI_NODE = "multi_node"


@dataclass(frozen=True)
class Placement:
    """The GPUs chosen for a request, and how they were spread."""

    gpu_ids: list[int]
    placement: str
    preempt: list[int]  # ids of preemptible allocations that must be cut short
    node_of: dict[int, int] = field(default_factory=dict)  # node id of each GPU placed


# An offer's pool when it names no nodes: every node of its model at its site (fixed SQL: it runs
# on every lease and hold; docs/architecture.md, "Request path costs").
POOL_NODES_SQL = f"""
SELECT n.id FROM {Node._meta.db_table} n
WHERE n.site_id = %s AND n.gpu_model_id = %s ORDER BY n.id"""


def pool_node_ids(offer: Offer) -> list[int]:
    """Nodes behind an offer: the named ones, else every node of its model at its site.

    The named nodes come from the offer's prefetched `nodes` when the caller loaded them (the
    offer views do), so placement does not read them twice.
    """
    named = [node.pk for node in offer.nodes.all()]
    if named:
        return sorted(named)
    with connection.cursor() as cursor:
        cursor.execute(POOL_NODES_SQL, [offer.site_id, offer.gpu_model_id])
        return [node_id for (node_id,) in cursor.fetchall()]


def hold_allocations_release(hold: Hold, *, at: datetime) -> int:
    """Release a locked hold's live allocations (locked in pk order); returns how many."""
    live = allocations_lock(Allocation.objects.filter(hold=hold, released_at__isnull=True))
    Allocation.objects.filter(pk__in=[a.pk for a in live]).update(
        released_at=at, ended_reason=AllocationEnd.RELEASED
    )
    return len(live)


def _holds_lapse(holds: list[Hold], *, now: datetime) -> int:
    """Lapse locked holds past their expiry and free their GPUs; returns how many lapsed."""
    for hold in holds:
        freed = hold_allocations_release(hold, at=now)
        hold_status_advance(
            hold,
            to_status=HoldStatus.EXPIRED,
            at=hold.expires_at,
            actor="system:holds",
            reason=f"it was not turned into a lease by {hold.expires_at:%Y-%m-%d %H:%M} UTC",
            inputs={"expires_at": hold.expires_at, "gpus_freed": freed},
        )
    return len(holds)


def expired_holds_release(*, now: datetime) -> int:
    """Lapse every active hold past its expiry and free its GPUs; returns how many lapsed (the
    beat task `leasing.expire_holds`)."""
    with transaction.atomic():
        return _holds_lapse(expired_holds_lock(now=now), now=now)


def expired_holds_in_the_way_release(
    node_ids: list[int], *, start: datetime, end: datetime, now: datetime
) -> int:
    """Lapse the expired holds with a live allocation on these nodes overlapping [start, end)
    (placement, when it finds too few free GPUs); returns how many lapsed. Runs in the caller's
    transaction: the holds are claimed SKIP LOCKED, so it never waits."""
    in_the_way = expired_holds_lock(now=now, node_ids=node_ids, start=start, end=end)
    return _holds_lapse(in_the_way, now=now)


# Free GPUs of some nodes for a window, by the one rule of leasing.selectors.free; {extra} takes
# the optional "only" / "exclude" conditions (leasing.locks.free_gpus_skip_locked claims them).
FREE_GPUS_SQL = f"""
SELECT g.id, g.node_id
FROM inventory_gpu g
JOIN inventory_node n ON n.id = g.node_id
WHERE g.node_id = ANY(%(node_ids)s)
  AND {FREE_GPU_CONDITION}{{extra}}
ORDER BY g.node_id, g.index
"""


def free_gpus_statement(
    node_ids: list[int],
    *,
    start: datetime,
    end: datetime,
    may_preempt: bool,
    only: list[int] | None = None,
    exclude: set[int] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The free-GPU read of placement and its parameters (bench/bare.py replays it bare)."""
    extra = ""
    if only is not None:
        extra += "\n  AND g.id = ANY(%(only)s)"
    if exclude:
        extra += "\n  AND NOT (g.id = ANY(%(exclude)s))"
    params = free_params(start=start, end=end, may_preempt=may_preempt)
    params.update(node_ids=node_ids, only=only or [], exclude=sorted(exclude or ()))
    return FREE_GPUS_SQL.format(extra=extra), params


def free_gpus(
    node_ids: list[int],
    *,
    start: datetime,
    end: datetime,
    may_preempt: bool,
    lock: bool,
    only: list[int] | None = None,
    exclude: set[int] | None = None,
) -> dict[int, list[int]]:
    """Free GPU ids per node; with lock, the rows are locked and ones busy elsewhere skipped."""
    sql, params = free_gpus_statement(
        node_ids, start=start, end=end, may_preempt=may_preempt, only=only, exclude=exclude
    )
    if lock:
        rows = free_gpus_skip_locked(sql, params)
    else:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    by_node: dict[int, list[int]] = defaultdict(list)
    for gpu_id, node_id in rows:
        by_node[node_id].append(gpu_id)
    return by_node


def free_gpu_count(
    offer: Offer,
    *,
    start: datetime,
    end: datetime,
    may_preempt: bool,
    node_ids: list[int] | None = None,
) -> int:
    """How many GPUs of the offer (of its pool `node_ids`, when read already) are free for the
    whole window (no locks)."""
    if node_ids is None:
        node_ids = pool_node_ids(offer)
    free = free_gpus(node_ids, start=start, end=end, may_preempt=may_preempt, lock=False)
    return sum(len(ids) for ids in free.values())


def gpus_choose(free: dict[int, list[int]], count: int) -> tuple[list[int], str] | None:
    """One node when the count fits one (the tightest fit), else the fullest nodes of the site."""
    fitting = [node for node, ids in free.items() if len(ids) >= count]
    if fitting:
        node = min(fitting, key=lambda n: (len(free[n]), n))
        return free[node][:count], SINGLE_NODE
    if sum(len(ids) for ids in free.values()) < count:
        return None
    chosen: list[int] = []
    for node in sorted(free, key=lambda n: (-len(free[n]), n)):
        chosen.extend(free[node][: count - len(chosen)])
        if len(chosen) == count:
            break
    return chosen, MULTI_NODE


def _preemptible_overlaps(gpu_ids: list[int], *, start: datetime, end: datetime) -> list[int]:
    return list(
        Allocation.objects.filter(
            gpu_id__in=gpu_ids,
            released_at__isnull=True,
            preemptible=True,
            period__overlap=DateTimeTZRange(start, end, "[)"),
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _booking_of(allocation: Allocation) -> Booking:
    """The interruptible lease or hold an allocation belongs to, for the cost of a cut."""
    if allocation.lease is not None:
        lease = allocation.lease
        return Booking(f"lease:{lease.pk}", lease.start, lease.price_per_gpu_hour)
    hold = allocation.hold
    assert hold is not None  # an allocation is a lease's or a hold's (check constraint)
    rate = hold.offer.interruptible_price_per_gpu_hour or Decimal(0)
    return Booking(f"hold:{hold.pk}", hold.start, rate)


def _cheapest_preemption(
    free: dict[int, list[int]],
    reachable: dict[int, list[int]],
    *,
    count: int,
    start: datetime,
    end: datetime,
    cut_at: datetime,
) -> tuple[list[int], list[int]] | None:
    """Every truly free GPU plus the cheapest interruptible GPUs to cut (leasing.preemption),
    `reachable` being the GPUs free once interruptible bookings may be cut; returns (free GPU
    ids, GPU ids to cut) or None when even preemption cannot meet `count`."""
    free_ids = sorted(gpu for ids in free.values() for gpu in ids)
    needed = count - len(free_ids)
    truly_free = set(free_ids)
    candidate_ids = sorted(
        gpu for ids in reachable.values() for gpu in ids if gpu not in truly_free
    )
    if len(candidate_ids) < needed:
        return None
    spans: dict[int, list[BookedSpan]] = defaultdict(list)
    bookings: dict[str, Booking] = {}
    node_of: dict[int, int] = {}
    overlapping = Allocation.objects.filter(
        gpu_id__in=candidate_ids,
        released_at__isnull=True,
        preemptible=True,
        period__overlap=DateTimeTZRange(start, end, "[)"),
    ).select_related("lease", "hold__offer")
    for allocation in overlapping.order_by("pk"):
        booking = _booking_of(allocation)
        bookings[booking.key] = booking
        node_of[allocation.gpu_id] = allocation.node_id
        spans[allocation.gpu_id].append(
            BookedSpan(booking.key, allocation.period.lower, allocation.period.upper or end)
        )
    cut = cheapest_cut(
        [
            CandidateGpu(gpu_id, node_of[gpu_id], tuple(spans[gpu_id]))
            for gpu_id in candidate_ids
            if gpu_id in spans
        ],
        needed=needed,
        cut_at=cut_at,
        bookings=bookings,
    )
    if cut is None:
        return None
    return free_ids, list(cut.gpu_ids)


def _lock_wanted(
    node_ids: list[int], wanted: list[int], *, start: datetime, end: datetime, may_preempt: bool
) -> dict[int, int]:
    """Lock exactly the wanted GPUs that are still free (SKIP LOCKED); the node of each it got."""
    if not wanted:
        return {}
    locked = free_gpus(
        node_ids, start=start, end=end, may_preempt=may_preempt, lock=True, only=wanted
    )
    return {gpu: node for node, ids in locked.items() for gpu in ids}


def place(
    offer: Offer,
    *,
    count: int,
    start: datetime,
    end: datetime,
    preemptible: bool,
    now: datetime | None = None,
    before_lock: Callable[[], None] | None = None,
) -> Placement:
    """Lock and choose `count` free GPUs of the offer for [start, end), or raise CapacityGone.

    Truly free GPUs first, on any node of the offer (one node when the count fits one, the
    tightest fit; else the fullest nodes). Only when they fall short does an on-demand or
    reserved request (`preemptible` False) cut interruptible allocations: it then takes every
    truly free GPU and the cheapest cut for the rest (leasing.preemption). Choose from an
    unlocked read, then lock exactly the chosen rows (SKIP LOCKED): a GPU another transaction is
    booking is skipped and the choice is made again without it, so concurrent small requests
    share a node instead of failing on each other's locks. When too few GPUs are free, the
    expired holds in the way (not lapsed yet by the beat task) are lapsed once and the choice is
    made again. Must run inside the caller's transaction: the locks last until it commits.

    `before_lock` runs once, when a first choice is found and before any GPU is locked: the
    caller's writes that need no GPU but are wanted only when some are free (a lease's contract)
    then hold no GPU lock while they run; a refusal after it still rolls them back with the
    caller's transaction.
    """
    node_ids = pool_node_ids(offer)
    may_preempt = not preemptible
    now = now or timezone.now()
    cut_at = preemption_cut_time(offer, start=start, now=now)
    busy_elsewhere: set[int] = set()
    expired_lapsed = False
    free_now: int | None = None
    for _ in range(MAX_PLACEMENT_ATTEMPTS):
        # What the refusal reports as free, when this attempt's read counted the whole pool
        # (nothing excluded) in the request's own mode: not read a second time.
        free_now = None
        free = free_gpus(
            node_ids, start=start, end=end, may_preempt=False, lock=False, exclude=busy_elsewhere
        )
        if not busy_elsewhere and not may_preempt:
            free_now = sum(len(ids) for ids in free.values())
        choice = gpus_choose(free, count)
        if choice is None and not expired_lapsed:
            expired_lapsed = True
            if expired_holds_in_the_way_release(node_ids, start=start, end=end, now=now):
                continue
        to_cut: list[int] = []
        if choice is None and may_preempt:
            reachable = free_gpus(
                node_ids, start=start, end=end, may_preempt=True, lock=False, exclude=busy_elsewhere
            )
            if not busy_elsewhere:
                free_now = sum(len(ids) for ids in reachable.values())
            preemption = _cheapest_preemption(
                free,
                reachable,
                count=count,
                start=start,
                end=end,
                cut_at=cut_at,
            )
            if preemption is not None:
                free_ids, to_cut = preemption
                nodes = {node for node, ids in free.items() if ids} | set(
                    Gpu.objects.filter(pk__in=to_cut).values_list("node_id", flat=True)
                )
                choice = (free_ids + to_cut, SINGLE_NODE if len(nodes) == 1 else MULTI_NODE)
        if choice is None:
            break
        if before_lock is not None:
            before_lock()
            before_lock = None
        wanted, placement = choice
        free_wanted = sorted(set(wanted) - set(to_cut))
        got = _lock_wanted(node_ids, free_wanted, start=start, end=end, may_preempt=False)
        got |= _lock_wanted(node_ids, sorted(to_cut), start=start, end=end, may_preempt=True)
        if len(got) == count:
            preempt = _preemptible_overlaps(sorted(to_cut), start=start, end=end) if to_cut else []
            return Placement(gpu_ids=sorted(got), placement=placement, preempt=preempt, node_of=got)
        busy_elsewhere |= set(wanted) - set(got)
    if free_now is None:
        free_now = free_gpu_count(
            offer, start=start, end=end, may_preempt=may_preempt, node_ids=node_ids
        )
    raise CapacityGone(
        f"Only {counted(free_now, 'GPU')} of this offer {noun(free_now, 'is', 'are')} free for "
        f"the whole window; {count} {noun(count, 'was', 'were')} asked for.",
        detail={"free_gpus": free_now, "requested": count},
    )


def allocations_create(
    *,
    gpu_ids: list[int],
    start: datetime,
    end: datetime,
    preemptible: bool,
    lease: Lease | None = None,
    hold: Hold | None = None,
    node_of: Mapping[int, int] | None = None,
) -> list[Allocation]:
    """Insert one allocation per GPU; an overlap caught by the database becomes a 409.

    `node_of` (each GPU's node, as placement read it) spares reading the GPUs again; the
    trigger `allocation_node_matches_gpu` still refuses a wrong node.
    """
    if node_of is None or not set(gpu_ids) <= set(node_of):
        node_of = dict(Gpu.objects.filter(pk__in=gpu_ids).values_list("pk", "node_id"))
    rows = [
        Allocation(
            gpu_id=gpu_id,
            node_id=node_of[gpu_id],
            lease=lease,
            hold=hold,
            period=DateTimeTZRange(start, end, "[)"),
            preemptible=preemptible,
        )
        for gpu_id in gpu_ids
    ]
    try:
        with transaction.atomic():
            return insert_many(rows)  # bulk_create's INSERT, written once
    except IntegrityError as exc:
        if "allocation_no_double_booking" not in str(exc):
            raise
        raise CapacityGone(
            "Another booking took these GPUs at the same moment; try again.",
            detail={"requested": len(gpu_ids)},
        ) from exc


def preemption_cut_time(offer: Offer, *, start: datetime, now: datetime) -> datetime:
    """When preempted GPUs are handed over: the new start, but never before the notice runs out."""
    return max(start, now + timedelta(minutes=offer.preemption_notice_minutes))
