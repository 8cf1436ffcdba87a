"""Holds and leases: reserve specific GPUs, turn them into a lease under a contract, extend,
preempt interruptible capacity, replace failed GPUs, and end early through the exit terms."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone

from accounts.models import Organization
from contracts.choices import ContractStatus, EventKind
from contracts.models import Contract
from contracts.services import (
    acceptance_run_record,
    contract_activate,
    contract_amend,
    contract_create,
    contract_reject_at_acceptance,
    contract_replace_hardware,
    contract_request_exit,
    event_record,
)
from core.errors import Conflict, SemanticError, ValidationFailed
from inventory.choices import GpuHealth
from inventory.models import Gpu
from inventory.selectors import index_fixing_rate
from leasing.choices import (
    LIVE_LEASE_STATUSES,
    AllocationEnd,
    HoldStatus,
    LeaseStatus,
    OfferStatus,
    PricingMode,
    Workload,
)
from leasing.errors import CapacityGone, HoldExpired, InvalidWindow, OfferUnavailable, QuoteExpired
from leasing.models import Allocation, Hold, Lease, Offer, PreemptionNotice, Quote
from leasing.pricing import offer_prices, rate_for
from leasing.selectors.windows import MAX_WINDOW, window_end
from leasing.services.allocation import (
    allocations_create,
    expired_holds_release,
    free_gpus,
    place,
    preemption_cut_time,
)

DEFAULT_HOLD_TTL = timedelta(minutes=10)
# A window may start a little in the past: clocks differ and requests take time.
START_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class LeaseRequest:
    """What a customer asks for: a count of GPUs of an offer for a window, in a pricing mode."""

    offer: Offer
    gpu_count: int
    start: datetime
    end: datetime
    pricing_mode: str
    term_months: int | None = None


def request_build(
    *,
    offer: Offer,
    gpu_count: int,
    start: datetime,
    end: datetime | None = None,
    hours: int | None = None,
    pricing_mode: str = PricingMode.ON_DEMAND,
    term_months: int | None = None,
    now: datetime | None = None,
) -> LeaseRequest:
    """Validate a lease request against the offer; the window may be end, hours or a term."""
    now = now or timezone.now()
    if gpu_count is None or gpu_count <= 0:
        raise ValidationFailed("gpu_count must be positive.", code="invalid_count")
    if end is None and hours is not None:
        end = window_end(start, hours=hours)
    if end is None and pricing_mode == PricingMode.RESERVED and term_months:
        end = window_end(start, term_months=term_months)
    if end is None:
        raise InvalidWindow("Give end, hours, or term_months for reserved pricing.")
    if end <= start:
        raise InvalidWindow("The window must end after it starts.", detail={"start": str(start)})
    if start < now - START_SKEW:
        raise InvalidWindow("The window starts in the past.", code="window_in_past")
    if offer.status != OfferStatus.PUBLISHED:
        raise OfferUnavailable("The offer is paused.", code="offer_paused")
    if start < offer.available_from or (offer.available_until and end > offer.available_until):
        raise OfferUnavailable(
            "The offer does not cover this window.",
            detail={
                "available_from": offer.available_from.isoformat(),
                "available_until": offer.available_until.isoformat()
                if offer.available_until
                else None,
            },
        )
    if (end - start) < timedelta(hours=offer.min_term_hours):
        raise OfferUnavailable(
            f"The offer's minimum term is {offer.min_term_hours} hour(s).", code="below_min_term"
        )
    rate_for(offer_prices(offer), mode=pricing_mode, term_months=term_months)  # mode available?
    return LeaseRequest(offer, gpu_count, start, end, pricing_mode, term_months)


def request_from_quote(quote: Quote, *, now: datetime | None = None) -> LeaseRequest:
    """The request a quote priced, re-validated against the offer as it is now."""
    now = now or timezone.now()
    if quote.expires_at <= now:
        raise QuoteExpired(detail={"expired_at": quote.expires_at.isoformat()})
    return request_build(
        offer=quote.offer,
        gpu_count=quote.gpu_count,
        start=quote.start,
        end=quote.end,
        pricing_mode=quote.pricing_mode,
        term_months=quote.term_months,
        now=now,
    )


# ---------------------------------------------------------------- holds


def hold_create(
    *,
    customer: Organization,
    request: LeaseRequest,
    quote: Quote | None = None,
    ttl: timedelta | None = None,
    now: datetime | None = None,
) -> Hold:
    """Reserve free GPUs for a short time (holds never preempt: only a lease does)."""
    now = now or timezone.now()
    expired_holds_release(now=now)
    ttl = ttl or timedelta(
        minutes=getattr(settings, "HOLD_TTL_MINUTES", DEFAULT_HOLD_TTL.seconds // 60)
    )
    with transaction.atomic():
        placement = place(
            request.offer,
            count=request.gpu_count,
            start=request.start,
            end=request.end,
            preemptible=True,  # a hold takes only GPUs nobody holds, interruptible or not
        )
        hold = Hold.objects.create(
            customer=customer,
            offer=request.offer,
            quote=quote,
            gpu_count=request.gpu_count,
            start=request.start,
            end=request.end,
            pricing_mode=request.pricing_mode,
            term_months=request.term_months,
            expires_at=now + ttl,
        )
        allocations_create(
            gpu_ids=placement.gpu_ids,
            start=request.start,
            end=request.end,
            preemptible=request.pricing_mode == PricingMode.INTERRUPTIBLE,
            hold=hold,
        )
    return hold


@transaction.atomic
def hold_release(*, hold: Hold, now: datetime | None = None) -> Hold:
    """Give a hold's GPUs back before it expires."""
    hold = Hold.objects.select_for_update().get(pk=hold.pk)
    if hold.status != HoldStatus.ACTIVE:
        raise Conflict(f"The hold is {hold.status}.", code="hold_not_active")
    Allocation.objects.filter(hold=hold, released_at__isnull=True).update(
        released_at=now or timezone.now(), ended_reason=AllocationEnd.RELEASED
    )
    hold.status = HoldStatus.RELEASED
    hold.save(update_fields=["status"])
    return hold


# ---------------------------------------------------------------- leases


def _lease_contract(
    *, customer: Organization, request: LeaseRequest, rate: Decimal, actor: str, now: datetime
) -> Contract:
    """The lease's contract, frozen from the offer's template at this moment."""
    offer = request.offer
    contract = contract_create(
        lessor=offer.provider,
        lessee=customer,
        term_start=request.start,
        term_end=request.end,
        currency=offer.currency,
        pricing_basis="card_hour",
        base_rate_per_gpu_hour=rate,
        committed_gpus=request.gpu_count,
        leased_model_slug=offer.gpu_model.slug,
        reference_market_rate=index_fixing_rate(
            gpu_model_slug=offer.gpu_model.slug,
            day=request.start.date(),
            currency=offer.currency,
            term="on_demand",
        ),
        clauses=offer.contract_template,
        actor=actor,
    )
    return contract_activate(contract=contract, actor=actor, at=max(now, request.start))


def _lease_row(
    *,
    customer: Organization,
    request: LeaseRequest,
    contract: Contract,
    rate: Decimal,
    placement: str,
    hold: Hold | None,
    workload: str,
) -> Lease:
    status = (
        LeaseStatus.PENDING_ACCEPTANCE
        if contract.status == ContractStatus.PENDING_ACCEPTANCE
        else LeaseStatus.ACTIVE
    )
    return Lease.objects.create(
        customer=customer,
        offer=request.offer,
        contract=contract,
        hold=hold,
        gpu_count=request.gpu_count,
        start=request.start,
        end=request.end,
        pricing_mode=request.pricing_mode,
        term_months=request.term_months,
        price_per_gpu_hour=rate,
        currency=request.offer.currency,
        status=status,
        placement=placement,
        workload=workload,
    )


def _preempt(
    allocation_ids: list[int], *, by: Lease, cut_at: datetime, now: datetime, actor: str
) -> None:
    """Cut interruptible allocations short at `cut_at` and tell their customers."""
    cut: dict[int, int] = {}
    allocations = (
        Allocation.objects.select_for_update(of=("self",))
        .filter(pk__in=allocation_ids)
        .order_by("pk")
    )
    for allocation in allocations:
        lower = allocation.period.lower
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
        payload = {
            "event": "lease.preempted",
            "lease_id": lease.pk,
            "contract": lease.contract.number,
            "gpu_count": cut[lease.pk],
            "cut_at": cut_at.isoformat(),
            "preempted_by_lease_id": by.pk,
        }
        PreemptionNotice.objects.create(
            lease=lease, preempted_by=by, gpu_count=cut[lease.pk], cut_at=cut_at, payload=payload
        )
        event_record(
            lease.contract,
            kind=EventKind.PREEMPTED,
            effective_at=cut_at,
            explanation=(
                f"{cut[lease.pk]} interruptible GPU(s) of this lease were preempted at "
                f"{cut_at:%Y-%m-%d %H:%M} UTC by an on-demand or reserved lease; "
                "billing stops at the cut."
            ),
            actor=actor,
            inputs=payload,
        )


def lease_create(
    *,
    customer: Organization,
    request: LeaseRequest | None = None,
    hold: Hold | None = None,
    quote: Quote | None = None,
    workload: str = Workload.UNSPECIFIED,
    actor: str,
    now: datetime | None = None,
) -> Lease:
    """Lease from a hold, a quote, or an offer + count + window; creates the contract too.

    `workload` (training, inference or unspecified) is set here once; nothing changes it later.
    """
    now = now or timezone.now()
    if workload not in Workload.values:
        raise ValidationFailed(
            f"workload is one of {', '.join(Workload.values)}.",
            code="invalid_workload",
            detail={"field": "workload"},
        )
    expired_holds_release(now=now)
    with transaction.atomic():
        if hold is not None:
            return _lease_from_hold(
                customer=customer, hold=hold, workload=workload, actor=actor, now=now
            )
        if quote is not None:
            if quote.customer_id != customer.pk:
                raise Conflict("The quote is not yours.", code="quote_not_yours")
            request = request_from_quote(quote, now=now)
        if request is None:
            raise ValidationFailed(
                "Give a hold, a quote, or an offer and a window.", code="invalid"
            )
        return _lease_from_request(
            customer=customer, request=request, workload=workload, actor=actor, now=now
        )


def _lease_from_request(
    *, customer: Organization, request: LeaseRequest, workload: str, actor: str, now: datetime
) -> Lease:
    interruptible = request.pricing_mode == PricingMode.INTERRUPTIBLE
    placement = place(
        request.offer,
        count=request.gpu_count,
        start=request.start,
        end=request.end,
        preemptible=interruptible,
    )
    rate, _ = rate_for(
        offer_prices(request.offer), mode=request.pricing_mode, term_months=request.term_months
    )
    contract = _lease_contract(customer=customer, request=request, rate=rate, actor=actor, now=now)
    lease = _lease_row(
        customer=customer,
        request=request,
        contract=contract,
        rate=rate,
        placement=placement.placement,
        hold=None,
        workload=workload,
    )
    taken_from_interruptible: set[int] = set()
    if placement.preempt:
        cut_at = preemption_cut_time(request.offer, start=request.start, now=now)
        taken_from_interruptible = set(
            Allocation.objects.filter(pk__in=placement.preempt).values_list("gpu_id", flat=True)
        )
        _preempt(placement.preempt, by=lease, cut_at=cut_at, now=now, actor=actor)
        # The preempted GPUs join this lease when the notice runs out.
        allocations_create(
            gpu_ids=sorted(taken_from_interruptible),
            start=max(request.start, cut_at),
            end=request.end,
            preemptible=False,
            lease=lease,
        )
    allocations_create(
        gpu_ids=[g for g in placement.gpu_ids if g not in taken_from_interruptible],
        start=request.start,
        end=request.end,
        preemptible=interruptible,
        lease=lease,
    )
    return lease


def _lease_from_hold(
    *, customer: Organization, hold: Hold, workload: str, actor: str, now: datetime
) -> Lease:
    hold = (
        Hold.objects.select_for_update(of=("self",))
        .select_related("offer__gpu_model")
        .get(pk=hold.pk)
    )
    if hold.customer_id != customer.pk:
        raise Conflict("The hold is not yours.", code="hold_not_yours")
    if hold.status == HoldStatus.CONVERTED:
        raise Conflict("The hold was already turned into a lease.", code="hold_converted")
    if hold.status != HoldStatus.ACTIVE or hold.expires_at <= now:
        raise HoldExpired(detail={"expired_at": hold.expires_at.isoformat()})
    request = LeaseRequest(
        hold.offer, hold.gpu_count, hold.start, hold.end, hold.pricing_mode, hold.term_months
    )
    rate, _ = rate_for(
        offer_prices(hold.offer), mode=hold.pricing_mode, term_months=hold.term_months
    )
    contract = _lease_contract(customer=customer, request=request, rate=rate, actor=actor, now=now)
    allocations = Allocation.objects.filter(hold=hold, released_at__isnull=True)
    node_count = allocations.values("gpu__node_id").distinct().count()
    lease = _lease_row(
        customer=customer,
        request=request,
        contract=contract,
        rate=rate,
        placement="single_node" if node_count == 1 else "multi_node",
        hold=hold,
        workload=workload,
    )
    # The GPUs stay booked without a gap: the hold's rows become the lease's.
    allocations.update(lease=lease, hold=None)
    hold.status = HoldStatus.CONVERTED
    hold.save(update_fields=["status"])
    return lease


def lease_sync_status(lease: Lease) -> Lease:
    """Follow the contract: acceptance passed → active; contract ended → lease ended."""
    contract = lease.contract
    target = lease.status
    if contract.status in (ContractStatus.ACTIVE, ContractStatus.NOTICE_GIVEN):
        target = LeaseStatus.ACTIVE
    elif contract.status == ContractStatus.ENDED:
        target = (
            LeaseStatus.CANCELLED
            if contract.end_reason == "rejected_at_acceptance"
            else LeaseStatus.ENDED
        )
    if target != lease.status:
        lease.status = target
        if target in (LeaseStatus.ENDED, LeaseStatus.CANCELLED):
            lease.ended_at = contract.ended_at
        lease.save(update_fields=["status", "ended_at", "updated_at"])
    return lease


@transaction.atomic
def lease_acceptance_run_record(*, lease: Lease, actor: str, **run: Any) -> tuple[Lease, Any, Any]:
    """Record an acceptance run on the lease's contract; pass starts billing and the lease."""
    lease = (
        Lease.objects.select_for_update(of=("self",)).select_related("contract").get(pk=lease.pk)
    )
    record, outcome = acceptance_run_record(contract=lease.contract, actor=actor, **run)
    lease.contract.refresh_from_db()
    return lease_sync_status(lease), record, outcome


def _cut_allocations(lease: Lease, *, at: datetime, reason: str, now: datetime) -> None:
    for allocation in Allocation.objects.select_for_update().filter(
        lease=lease, released_at__isnull=True
    ):
        lower, upper = allocation.period.lower, allocation.period.upper
        if at <= lower:
            allocation.released_at = now
            allocation.ended_reason = reason
            allocation.save(update_fields=["released_at", "ended_reason"])
        elif upper is None or at < upper:
            allocation.period = DateTimeTZRange(lower, at, "[)")
            allocation.ended_reason = reason
            allocation.save(update_fields=["period", "ended_reason"])


@transaction.atomic
def lease_reject(*, lease: Lease, actor: str, now: datetime | None = None) -> Lease:
    """Reject without fee after failed acceptance: the contract ends and the GPUs are freed."""
    now = now or timezone.now()
    lease = (
        Lease.objects.select_for_update(of=("self",)).select_related("contract").get(pk=lease.pk)
    )
    contract_reject_at_acceptance(contract=lease.contract, actor=actor)
    _cut_allocations(lease, at=now, reason=AllocationEnd.ENDED_EARLY, now=now)
    lease.contract.refresh_from_db()
    return lease_sync_status(lease)


@transaction.atomic
def lease_exit(
    *, lease: Lease, party: str, exit_date: date, actor: str, now: datetime | None = None
) -> tuple[Lease, Any]:
    """End a lease early through its contract's exit terms; GPUs are freed at the effective end."""
    now = now or timezone.now()
    lease = (
        Lease.objects.select_for_update(of=("self",)).select_related("contract").get(pk=lease.pk)
    )
    _, quote = contract_request_exit(
        contract=lease.contract, party=party, exit_date=exit_date, actor=actor, now=now
    )
    _cut_allocations(lease, at=quote.effective_end, reason=AllocationEnd.ENDED_EARLY, now=now)
    lease.end = min(lease.end, quote.effective_end)
    lease.save(update_fields=["end", "updated_at"])
    return lease, quote


@transaction.atomic
def lease_extend(*, lease: Lease, new_end: datetime, actor: str) -> Lease:
    """Extend a lease on the same GPUs, only if every one of them is free until `new_end`."""
    lease = (
        Lease.objects.select_for_update(of=("self",))
        .select_related("contract", "offer")
        .get(pk=lease.pk)
    )
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
    live = list(
        Allocation.objects.select_for_update()
        .filter(lease=lease, released_at__isnull=True, period__endswith=lease.end)
        .order_by("gpu_id")
    )
    # Lock the GPU rows (in pk order) so no reservation slips in between check and update.
    list(
        Gpu.objects.select_for_update()
        .filter(pk__in=[a.gpu_id for a in live])
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    taken = Allocation.objects.filter(
        gpu_id__in=[a.gpu_id for a in live],
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
    lease.end = new_end
    lease.save(update_fields=["end", "updated_at"])
    contract_amend(contract=lease.contract, changes={"term_end": new_end}, actor=actor)
    return lease


@transaction.atomic
def lease_replace_gpu(
    *, lease: Lease, failed_gpu: Gpu, actor: str, at: datetime | None = None
) -> Allocation:
    """Swap a failed GPU for a free one of the same model, or of its successor (re-priced)."""
    at = at or timezone.now()
    lease = (
        Lease.objects.select_for_update()
        .select_related("contract", "offer__gpu_model", "offer__site")
        .get(pk=lease.pk)
    )
    if lease.status not in LIVE_LEASE_STATUSES:
        raise Conflict(f"A {lease.status} lease has no GPUs to replace.", code="lease_not_live")
    old = (
        Allocation.objects.select_for_update()
        .filter(lease=lease, gpu=failed_gpu, released_at__isnull=True)
        .first()
    )
    if old is None:
        raise SemanticError("That GPU is not allocated to this lease.", code="gpu_not_in_lease")
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
    Gpu.objects.filter(pk=failed_gpu.pk).update(health=GpuHealth.FAILED, health_changed_at=at)
    model = lease.offer.gpu_model
    replacement = _free_replacement(lease, model_id=model.pk, start=start, end=end)
    if replacement is None and model.successor_id is not None:
        replacement = _free_replacement(lease, model_id=model.successor_id, start=start, end=end)
        if replacement is not None:
            successor = replacement.node.gpu_model
            contract_replace_hardware(
                contract=lease.contract,
                old_throughput=model.dense_bf16_tflops,
                new_throughput=successor.dense_bf16_tflops,
                new_model_slug=successor.slug,
                effective_at=start,
                actor=actor,
            )
    if replacement is None:
        raise CapacityGone(
            "No free GPU of this model or its successor at the site.",
            code="no_replacement",
            detail={"free_gpus": 0},
        )
    (new,) = allocations_create(
        gpu_ids=[replacement.pk], start=start, end=end, preemptible=old.preemptible, lease=lease
    )
    new.replaces = old
    new.save(update_fields=["replaces"])
    return new


def _free_replacement(lease: Lease, *, model_id: int, start: datetime, end: datetime) -> Gpu | None:
    """A free, healthy GPU of the model at the lease's site, locked for this transaction."""
    node_ids = list(
        lease.offer.site.nodes.filter(gpu_model_id=model_id).values_list("pk", flat=True)
    )
    free = free_gpus(sorted(node_ids), start=start, end=end, may_preempt=False, lock=True)
    for gpu_ids in free.values():
        if gpu_ids:
            return Gpu.objects.select_related("node__gpu_model").get(pk=gpu_ids[0])
    return None


def leases_end_due(*, now: datetime | None = None) -> int:
    """Mark leases whose end has passed (or whose contract ended) as ended."""
    now = now or timezone.now()
    count = 0
    for lease in Lease.objects.filter(status__in=LIVE_LEASE_STATUSES, end__lte=now).order_by("pk"):
        with transaction.atomic():
            lease = Lease.objects.select_for_update().get(pk=lease.pk)
            if lease.status in LIVE_LEASE_STATUSES:
                lease.status = LeaseStatus.ENDED
                lease.ended_at = lease.end
                lease.save(update_fields=["status", "ended_at", "updated_at"])
                count += 1
    return count
