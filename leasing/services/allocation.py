"""Allocation of specific GPUs to a hold or a lease, with no double booking.

The invariant: a GPU never has two live allocations whose periods overlap. It is held three
times over: candidate GPU rows are locked (FOR UPDATE SKIP LOCKED, in gpu-id order) and re-checked
in a fresh statement after the lock; an on-demand or reserved request may cut short only
preemptible (interruptible) allocations; and the database's exclusion constraint
`allocation_no_double_booking` refuses any overlap the code would still let through (it is
translated to a 409, never a 500).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from inventory.choices import GpuHealth, NodeStatus
from leasing.choices import AllocationEnd, HoldStatus
from leasing.errors import CapacityGone
from leasing.models import Allocation, Hold, Lease, Offer

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


def pool_node_ids(offer: Offer) -> list[int]:
    """Nodes behind an offer: the named ones, else every node of its model at its site."""
    named = list(offer.nodes.values_list("pk", flat=True))
    if named:
        return sorted(named)
    from inventory.models import Node

    return sorted(
        Node.objects.filter(site_id=offer.site_id, gpu_model_id=offer.gpu_model_id).values_list(
            "pk", flat=True
        )
    )


def expired_holds_release(*, now: datetime) -> int:
    """Lapse every active hold past its expiry and free its GPUs; returns how many lapsed."""
    with transaction.atomic():
        hold_ids = list(
            Hold.objects.select_for_update(skip_locked=True)
            .filter(status=HoldStatus.ACTIVE, expires_at__lte=now)
            .values_list("pk", flat=True)
        )
        if not hold_ids:
            return 0
        Allocation.objects.filter(hold_id__in=hold_ids, released_at__isnull=True).update(
            released_at=now, ended_reason=AllocationEnd.RELEASED
        )
        Hold.objects.filter(pk__in=hold_ids).update(status=HoldStatus.EXPIRED)
        return len(hold_ids)


# Free GPUs of some nodes for a window. A live allocation blocks unless the request may preempt
# it (%(may_preempt)s true and the allocation is preemptible); an outage of the node or the GPU
# blocks; only healthy GPUs of active nodes count.
_FREE_GPUS_SQL = """
SELECT g.id, g.node_id
FROM inventory_gpu g
JOIN inventory_node n ON n.id = g.node_id
WHERE g.node_id = ANY(%(node_ids)s)
  AND g.health = %(healthy)s
  AND n.status = %(active)s
  AND NOT EXISTS (
    SELECT 1 FROM leasing_allocation a
    WHERE a.gpu_id = g.id AND a.released_at IS NULL
      AND a.period && tstzrange(%(start)s, %(end)s, '[)')
      AND NOT (a.preemptible AND %(may_preempt)s)
  )
  AND NOT EXISTS (
    SELECT 1 FROM inventory_outage o
    WHERE o.node_id = g.node_id AND (o.gpu_id IS NULL OR o.gpu_id = g.id)
      AND tstzrange(o.start, o."end", '[)') && tstzrange(%(start)s, %(end)s, '[)')
  )
ORDER BY g.node_id, g.index
"""


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
    sql = _FREE_GPUS_SQL
    if only is not None:
        sql = sql.replace("ORDER BY", "AND g.id = ANY(%(only)s)\nORDER BY")
    if exclude:
        sql = sql.replace("ORDER BY", "AND NOT (g.id = ANY(%(exclude)s))\nORDER BY")
    if lock:
        sql += " FOR UPDATE OF g SKIP LOCKED"
    params = {
        "node_ids": node_ids,
        "healthy": GpuHealth.OK,
        "active": NodeStatus.ACTIVE,
        "start": start,
        "end": end,
        "may_preempt": may_preempt,
        "only": only or [],
        "exclude": sorted(exclude or ()),
    }
    by_node: dict[int, list[int]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for gpu_id, node_id in cursor.fetchall():
            by_node[node_id].append(gpu_id)
    return by_node


def free_gpu_count(offer: Offer, *, start: datetime, end: datetime, may_preempt: bool) -> int:
    """How many GPUs of the offer are free for the whole window (no locks)."""
    free = free_gpus(
        pool_node_ids(offer), start=start, end=end, may_preempt=may_preempt, lock=False
    )
    return sum(len(ids) for ids in free.values())


def _choose(free: dict[int, list[int]], count: int) -> tuple[list[int], str] | None:
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


def place(
    offer: Offer, *, count: int, start: datetime, end: datetime, preemptible: bool
) -> Placement:
    """Lock and choose `count` free GPUs of the offer for [start, end), or raise CapacityGone.

    Choose from an unlocked read, then lock exactly the chosen rows (SKIP LOCKED): a GPU another
    transaction is booking is skipped and the choice is made again without it, so concurrent
    small requests share a node instead of failing on each other's locks. Must run inside the
    caller's transaction: the locks last until it commits.
    """
    node_ids = pool_node_ids(offer)
    may_preempt = not preemptible
    busy_elsewhere: set[int] = set()
    for _ in range(MAX_PLACEMENT_ATTEMPTS):
        free = free_gpus(
            node_ids,
            start=start,
            end=end,
            may_preempt=may_preempt,
            lock=False,
            exclude=busy_elsewhere,
        )
        choice = _choose(free, count)
        if choice is None:
            break
        wanted, placement = choice
        locked = free_gpus(
            node_ids, start=start, end=end, may_preempt=may_preempt, lock=True, only=wanted
        )
        got = sorted(gpu for ids in locked.values() for gpu in ids)
        if len(got) == count:
            preempt = _preemptible_overlaps(got, start=start, end=end) if may_preempt else []
            return Placement(gpu_ids=got, placement=placement, preempt=preempt)
        busy_elsewhere |= set(wanted) - set(got)
    free_now = free_gpu_count(offer, start=start, end=end, may_preempt=may_preempt)
    raise CapacityGone(
        f"Only {free_now} GPU(s) of this offer are free for the whole window; "
        f"{count} were asked for.",
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
) -> list[Allocation]:
    """Insert one allocation per GPU; an overlap caught by the database becomes a 409."""
    rows = [
        Allocation(
            gpu_id=gpu_id,
            lease=lease,
            hold=hold,
            period=DateTimeTZRange(start, end, "[)"),
            preemptible=preemptible,
        )
        for gpu_id in gpu_ids
    ]
    try:
        with transaction.atomic():
            return Allocation.objects.bulk_create(rows)
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
