"""Changes to a lease after it exists: extension, early exit, rejection after failed acceptance,
GPU replacement, preemption of interruptible capacity, and ending leases that are due (the status
sync with the contract and the cut of an early end live in leasing/services/ending.py).

Each writes a row of the lease's history (LeaseEvent) in its own transaction; status changes go
through `lease_status_advance`. Locks follow the order of docs/architecture.md: the lease, then
GPUs in pk order, then allocations in pk order, then the contract.
"""

from __future__ import annotations

from datetime import date, datetime

from django.db import transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import Q
from django.utils import timezone

from contracts import engine
from contracts.choices import ContractStatus, EndReason, EventKind
from contracts.services import (
    contract_amend,
    contract_reject_at_acceptance,
    contract_replace_hardware,
    contract_request_exit,
    contract_transition,
    event_record,
)
from core.errors import Conflict, SemanticError
from core.text import counted, noun
from inventory.choices import GpuHealth
from inventory.locks import node_lock
from inventory.models import Gpu, GpuModel
from inventory.services import gpu_health_set
from leasing.admission import Admission, admit
from leasing.choices import LIVE_LEASE_STATUSES, AllocationEnd, LeaseEventKind, LeaseStatus
from leasing.errors import CapacityGone, InvalidWindow, OfferUnavailable
from leasing.locks import allocations_lock, gpus_lock, lease_lock
from leasing.models import Allocation, Lease, PreemptionNotice
from leasing.selectors.windows import MAX_WINDOW
from leasing.services.allocation import allocations_create, free_gpus
from leasing.services.ending import (
    allocations_cut,
    lease_cut_short,
    lease_sync_status,
    live_allocations_lock,
)
from leasing.services.history import lease_event_record, lease_status_advance
from leasing.services.resale_parent import resold_time_guard

LIFECYCLE_ACTOR = "system:lifecycle"


def leases_end_due(*, now: datetime | None = None) -> int:
    """End live leases whose window is over, and those whose contract ended (they follow it)."""
    now = now or timezone.now()
    count = 0
    due = Lease.objects.filter(status__in=LIVE_LEASE_STATUSES).filter(
        Q(end__lte=now) | Q(contract__status=ContractStatus.ENDED)
    )
    for lease_id in due.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            lease = lease_lock(lease_id)
            if lease.status not in LIVE_LEASE_STATUSES:
                continue
            if lease.contract.status == ContractStatus.ENDED:
                lease_sync_status(lease, actor=LIFECYCLE_ACTOR)
            elif lease.end <= now:
                lease.ended_at = lease.end
                lease_status_advance(
                    lease,
                    to_status=LeaseStatus.ENDED,
                    at=lease.end,
                    actor=LIFECYCLE_ACTOR,
                    reason=f"its window ended {lease.end:%Y-%m-%d %H:%M} UTC",
                    inputs={"end": lease.end},
                    update_fields=["ended_at"],
                )
            else:
                continue
            count += 1
    return count


# ---------------------------------------------------------------- preemption


def allocations_preempt(
    allocation_ids: list[int], *, by: Lease, cut_at: datetime, now: datetime, actor: str
) -> None:
    """Cut interruptible allocations short at `cut_at` and tell their customers.

    Runs inside the preempting lease's transaction, after placement locked the GPUs; the
    preempted leases are not locked (their history rows only point at them).
    """
    cut: dict[int, int] = {}
    for allocation in allocations_lock(Allocation.objects.filter(pk__in=allocation_ids)):
        lower, upper = allocation.period.lower, allocation.period.upper
        if upper is not None and upper <= cut_at:
            continue  # it ends by itself before the cut: nothing to cut, never lengthened
        if cut_at <= lower:
            allocation.released_at = now
            allocation.ended_reason = AllocationEnd.PREEMPTED
            allocation.save(update_fields=["released_at", "ended_reason"])
        else:
            allocation.period = DateTimeTZRange(lower, cut_at, "[)")
            allocation.ended_reason = AllocationEnd.PREEMPTED
            allocation.save(update_fields=["period", "ended_reason"])
        if allocation.lease_id is not None:
            cut[allocation.lease_id] = cut.get(allocation.lease_id, 0) + 1
    for lease in Lease.objects.filter(pk__in=cut).select_related("contract").order_by("pk"):
        # The payload reaches the preempted lease's customer (history, webhooks): it never names
        # the preempting lease, which may be another customer's; the notice row keeps it.
        payload = {
            "event": "lease.preempted",
            "lease_id": lease.pk,
            "notice_given_at": now.isoformat(),
            "contract": lease.contract.number,
            "gpu_count": cut[lease.pk],
            "cut_at": cut_at.isoformat(),
        }
        PreemptionNotice.objects.create(
            lease=lease, preempted_by=by, gpu_count=cut[lease.pk], cut_at=cut_at, payload=payload
        )
        explanation = (
            f"{counted(cut[lease.pk], 'interruptible GPU')} of this lease "
            f"{noun(cut[lease.pk], 'was', 'were')} preempted at "
            f"{cut_at:%Y-%m-%d %H:%M} UTC by an on-demand or reserved lease; "
            "billing stops at the cut, where the lease ends (or runs on the GPUs it keeps)."
        )
        event_record(
            lease.contract,
            kind=EventKind.PREEMPTED,
            effective_at=cut_at,
            explanation=explanation,
            actor=actor,
            inputs=payload,
        )
        lease_event_record(
            lease,
            kind=LeaseEventKind.PREEMPTED,
            effective_at=cut_at,
            explanation=explanation,
            actor=actor,
            inputs=payload,
        )


# ---------------------------------------------------------------- reject, exit


@transaction.atomic
def lease_reject(*, lease: Lease, actor: str, now: datetime | None = None) -> Lease:
    """Reject without fee after failed acceptance: the contract ends and the GPUs are freed."""
    now = now or timezone.now()
    lease = lease_lock(lease)
    live = live_allocations_lock(lease)
    contract_reject_at_acceptance(contract=lease.contract, actor=actor)
    allocations_cut(live, at=now, reason=AllocationEnd.ENDED_EARLY, now=now)
    lease_event_record(
        lease,
        kind=LeaseEventKind.REJECTED,
        effective_at=now,
        explanation=(
            f"The lessee rejected the hardware after failed acceptance, without fee; "
            f"{counted(len(live), 'GPU')} {noun(len(live), 'was', 'were')} freed at "
            f"{now:%Y-%m-%d %H:%M} UTC."
        ),
        actor=actor,
        inputs={"gpus_freed": len(live), "contract": lease.contract.number},
    )
    lease.contract.refresh_from_db()
    return lease_sync_status(lease, actor=actor)


@transaction.atomic
def lease_exit(
    *, lease: Lease, party: str, exit_date: date, actor: str, now: datetime | None = None
) -> tuple[Lease, engine.TerminationQuote]:
    """End a lease early through its contract's exit terms; GPUs are freed at the effective end."""
    now = now or timezone.now()
    lease = lease_lock(lease)
    live_allocations_lock(lease)  # the lease, its allocations, then its contract
    _, quote = contract_request_exit(
        contract=lease.contract, party=party, exit_date=exit_date, actor=actor, now=now
    )
    # Resold time follows the assignment clause's on_parent_end, then the lease's own GPUs.
    lease_cut_short(lease, at=quote.effective_end, actor=actor, now=now)
    old_end = lease.end
    lease.end = min(lease.end, quote.effective_end)
    lease.save(update_fields=["end", "updated_at"])
    lease_event_record(
        lease,
        kind=LeaseEventKind.EXIT_REQUESTED,
        effective_at=now,
        explanation=(
            f"The {party} gave notice; the lease ends {lease.end:%Y-%m-%d %H:%M} UTC instead of "
            f"{old_end:%Y-%m-%d %H:%M} UTC. {quote.explanation}"
        ),
        actor=actor,
        inputs={
            "party": party,
            "exit_date": exit_date,
            "old_end": old_end,
            "new_end": lease.end,
            "fee": quote.fee.amount,
            "currency": quote.fee.currency,
            "fee_free_reason": quote.fee_free_reason,
        },
    )
    return lease, quote


# ---------------------------------------------------------------- extend, replace a GPU


@transaction.atomic
def lease_extend(*, lease: Lease, new_end: datetime, actor: str) -> Lease:
    """Extend a lease on the same GPUs, only if every one of them is free until `new_end`."""
    lease = lease_lock(lease)
    if lease.status not in LIVE_LEASE_STATUSES:
        raise Conflict(f"A {lease.status} lease cannot be extended.", code="lease_not_live")
    if new_end <= lease.end:
        raise InvalidWindow("The new end must be after the current end.", code="not_an_extension")
    if new_end - lease.start > MAX_WINDOW:
        # The limit of a new lease's window; without it a lease (and its contract) could run to
        # the year 9999, where the billing periods after its end no longer exist.
        raise InvalidWindow("The lease would be longer than ten years.", code="window_too_long")
    if lease.offer.available_until and new_end > lease.offer.available_until:
        raise OfferUnavailable("The offer ends before the new end.")
    # More time is a new commitment: the admission checks (a spent "block" budget, a dry
    # prepaid balance) refuse it as they refuse a new lease.
    admit(
        Admission(
            customer=lease.customer,
            gpu_count=lease.gpu_count,
            pricing_mode=lease.pricing_mode,
            now=timezone.now(),
            tags=lease.tags,
        )
    )
    running = Allocation.objects.filter(
        lease=lease, released_at__isnull=True, period__endswith=lease.end
    )
    # GPUs before allocations (the order placement and preemption take them in), so no
    # reservation slips in between the check and the update below.
    gpus_lock(running.values_list("gpu_id", flat=True))
    live = allocations_lock(running)
    gpu_ids = sorted(allocation.gpu_id for allocation in live)
    taken = Allocation.objects.filter(
        gpu_id__in=gpu_ids,
        released_at__isnull=True,
        period__overlap=DateTimeTZRange(lease.end, new_end, "[)"),
    ).exclude(lease=lease)
    if taken.exists():
        raise CapacityGone(
            "Some of this lease's GPUs are booked after its current end.",
            detail={"busy_gpu_ids": sorted(set(taken.values_list("gpu_id", flat=True)))},
        )
    for allocation in live:
        allocation.period = DateTimeTZRange(allocation.period.lower, new_end, "[)")
        allocation.save(update_fields=["period"])
    old_end = lease.end
    lease.end = new_end
    lease.save(update_fields=["end", "updated_at"])
    contract_amend(contract=lease.contract, changes={"term_end": new_end}, actor=actor)
    lease_event_record(
        lease,
        kind=LeaseEventKind.EXTENDED,
        effective_at=timezone.now(),
        explanation=(
            f"Extended on the same {counted(len(gpu_ids), 'GPU')} from {old_end:%Y-%m-%d %H:%M} to "
            f"{new_end:%Y-%m-%d %H:%M} UTC; contract {lease.contract.number} runs to the new end."
        ),
        actor=actor,
        inputs={"old_end": old_end, "new_end": new_end, "gpu_ids": gpu_ids},
    )
    return lease


@transaction.atomic
def lease_replace_gpu(
    *, lease: Lease, failed_gpu: Gpu, actor: str, at: datetime | None = None
) -> Allocation:
    """Swap a failed GPU for a free one: of the same model first, else of the lease's own model
    or its successor. Only the swapped GPU is priced (contract_replace_hardware): its new
    allocation carries its own rate, or none (the contract's rate); the contract's rate and
    model stay as they are. The swap is a contract event and a lease event, the failed GPU's
    health a row of its history."""
    at = at or timezone.now()
    lease = lease_lock(lease)
    if lease.status not in LIVE_LEASE_STATUSES:
        raise Conflict(f"A {lease.status} lease has no GPUs to replace.", code="lease_not_live")
    # The failed GPU's node (its health is written below), then the GPU, then its allocation.
    node_lock(failed_gpu.node_id)
    gpus_lock([failed_gpu.pk])
    old = next(
        iter(
            allocations_lock(
                Allocation.objects.filter(lease=lease, gpu=failed_gpu, released_at__isnull=True)
            )
        ),
        None,
    )
    if old is None:
        raise SemanticError("That GPU is not allocated to this lease.", code="gpu_not_in_lease")
    resold_time_guard(lease, gpu=failed_gpu, at=at)
    end = old.period.upper
    if end is not None and end <= at:
        # Its period is over (the lease was cut short, or its end passed before the job that
        # ends leases ran): there is nothing left to run on another GPU.
        raise Conflict("That GPU's allocation has already ended.", code="allocation_ended")
    start = max(at, old.period.lower)
    old.ended_reason = AllocationEnd.REPLACED
    if start <= old.period.lower:
        old.released_at = at  # replaced before it began: it never served
    else:
        old.period = DateTimeTZRange(old.period.lower, start, "[)")
    old.save(update_fields=["period", "ended_reason", "released_at"])
    gpu_health_set(
        gpu=failed_gpu,
        health=GpuHealth.FAILED,
        at=at,
        reason=f"failed in lease {lease.pk}, replaced by {actor}",
    )
    base_model = lease.offer.gpu_model
    failed_model = GpuModel.objects.get(nodes__gpus=failed_gpu)
    replacement = None
    for model_id in _replacement_models(failed_model, base_model):
        replacement = _free_replacement(lease, model_id=model_id, start=start, end=end)
        if replacement is not None:
            break
    if replacement is None:
        raise CapacityGone(
            "No free GPU of this model or its successor at the site.",
            code="no_replacement",
            detail={"free_gpus": 0},
        )
    new_model = replacement.node.gpu_model
    swap = contract_replace_hardware(
        contract=lease.contract,
        base_throughput=base_model.dense_bf16_tflops,
        old_model_slug=failed_model.slug,
        old_rate=old.rate_per_gpu_hour,
        new_model_slug=new_model.slug,
        new_throughput=new_model.dense_bf16_tflops,
        failed_gpu_id=failed_gpu.pk,
        replacement_gpu_id=replacement.pk,
        effective_at=start,
        actor=actor,
    )
    (new,) = allocations_create(
        gpu_ids=[replacement.pk], start=start, end=end, preemptible=old.preemptible, lease=lease
    )
    new.replaces = old
    new.rate_per_gpu_hour = swap.rate
    new.swap_event = swap
    new.save(update_fields=["replaces", "rate_per_gpu_hour", "swap_event"])
    repriced = swap.rate is not None and swap.rate != old.rate_per_gpu_hour
    lease_event_record(
        lease,
        kind=LeaseEventKind.GPU_REPLACED,
        effective_at=start,
        explanation=(
            f"GPU {failed_gpu.pk} ({failed_model.name}) failed and was replaced from "
            f"{start:%Y-%m-%d %H:%M} UTC by GPU {replacement.pk} ({new_model.name} on "
            f"{replacement.node.hostname}); "
            + (
                f"this GPU is billed at {swap.rate} {lease.currency} per GPU-hour."
                if swap.rate is not None
                else "this GPU is billed at the contract's rate."
            )
        ),
        actor=actor,
        inputs={
            "failed_gpu_id": failed_gpu.pk,
            "failed_gpu_model": failed_model.slug,
            "replacement_gpu_id": replacement.pk,
            "replacement_gpu_model": new_model.slug,
            "replaced_allocation_id": old.pk,
            "allocation_id": new.pk,
            "rate_per_gpu_hour": None if swap.rate is None else str(swap.rate),
            "contract_event_id": swap.pk,
            "repriced": repriced,
        },
    )
    return new


def _replacement_models(failed: GpuModel, base: GpuModel) -> list[int]:
    """Models a failed GPU may be swapped for, in order: its own (like-for-like), the lease's
    model, the lease model's successor (an upgrade, priced by the exit terms)."""
    order = [failed.pk, base.pk]
    if base.successor_id is not None:
        order.append(base.successor_id)
    return list(dict.fromkeys(order))


def _free_replacement(lease: Lease, *, model_id: int, start: datetime, end: datetime) -> Gpu | None:
    """A free, healthy GPU of the model at the lease's site, claimed (SKIP LOCKED) for this
    transaction: a GPU another transaction is booking is passed over, never waited for."""
    node_ids = list(
        lease.offer.site.nodes.filter(gpu_model_id=model_id).values_list("pk", flat=True)
    )
    free = free_gpus(sorted(node_ids), start=start, end=end, may_preempt=False, lock=True)
    for gpu_ids in free.values():
        if gpu_ids:
            return Gpu.objects.select_related("node__gpu_model").get(pk=gpu_ids[0])
    return None


# ---------------------------------------------------------------- carrying out preemptions


PREEMPTION_ACTOR = "system:preemption"


def preemptions_execute(*, now: datetime | None = None) -> int:
    """End (or shrink) the leases whose preemption cut has passed; returns the notices carried out.

    The allocations were cut when the notice was given; at the cut the lease follows them: with
    no GPU running past the cut, it ends there (its end, its contract ended at the cut with
    reason `preempted`, its status through the contract); otherwise it keeps the GPUs left and
    its contract's committed GPUs follow. One transaction per lease; a rerun finds nothing to do.
    """
    now = now or timezone.now()
    due = PreemptionNotice.objects.filter(executed_at__isnull=True, cut_at__lte=now)
    executed = 0
    for lease_id in sorted(set(due.values_list("lease_id", flat=True))):
        with transaction.atomic():
            lease = lease_lock(lease_id)
            notices = list(due.filter(lease=lease).order_by("cut_at", "pk"))
            if not notices:
                continue  # another run carried them out meanwhile
            cut_at = notices[-1].cut_at
            live = live_allocations_lock(lease)
            if lease.status in LIVE_LEASE_STATUSES:
                _lease_follow_cut(lease, live, cut_at=cut_at, notices=notices)
            PreemptionNotice.objects.filter(pk__in=[n.pk for n in notices]).update(executed_at=now)
            executed += len(notices)
    return executed


def _lease_follow_cut(
    lease: Lease, live: list[Allocation], *, cut_at: datetime, notices: list[PreemptionNotice]
) -> None:
    """End a locked lease at the cut, or shrink it to the GPUs running past it."""
    kept = sorted({a.gpu_id for a in live if a.period.upper is None or a.period.upper > cut_at})
    inputs = {"cut_at": cut_at, "notice_ids": [n.pk for n in notices], "gpus_kept": len(kept)}
    if not kept:
        if cut_at > lease.start and cut_at < lease.end:
            old_end = lease.end
            lease.end = cut_at
            lease.save(update_fields=["end", "updated_at"])
            inputs["old_end"] = old_end
        contract = lease.contract
        if contract.status != ContractStatus.ENDED:
            # Cut before it began, it never ran: it ends at its start, where billing would start.
            lease.contract = contract_transition(
                contract=contract,
                to_status=ContractStatus.ENDED,
                end_reason=EndReason.PREEMPTED,
                at=max(cut_at, lease.start),
                actor=PREEMPTION_ACTOR,
                reason=(
                    f"every GPU of lease {lease.pk} was preempted at {cut_at:%Y-%m-%d %H:%M} UTC"
                ),
            )
        lease_sync_status(lease, actor=PREEMPTION_ACTOR)
        return
    if len(kept) >= lease.gpu_count:
        return
    old_count = lease.gpu_count
    lease.gpu_count = len(kept)
    lease.save(update_fields=["gpu_count", "updated_at"])
    contract = lease.contract
    if contract.status != ContractStatus.ENDED and contract.committed_gpus is not None:
        lease.contract = contract_amend(
            contract=contract, changes={"committed_gpus": len(kept)}, actor=PREEMPTION_ACTOR
        )
    lease_event_record(
        lease,
        kind=LeaseEventKind.SHRUNK,
        effective_at=cut_at,
        explanation=(
            f"After the preemption at {cut_at:%Y-%m-%d %H:%M} UTC the lease runs on "
            f"{counted(len(kept), 'GPU')} instead of {old_count}; "
            f"it keeps its end {lease.end:%Y-%m-%d %H:%M} UTC."
        ),
        actor=PREEMPTION_ACTOR,
        inputs={**inputs, "old_gpu_count": old_count},
    )
