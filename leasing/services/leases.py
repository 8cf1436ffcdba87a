"""Leases from what a customer asks for: requests validated against the offer, and leases
created from a hold, a quote, or an offer with a window, each with its contract.

Changes to a lease after it exists (extend, exit, reject, replace a GPU, preemption, ending) are
in leasing.services.changes; holds in leasing.services.holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from contracts.choices import ContractStatus
from contracts.models import Contract
from core.errors import Conflict, ValidationFailed
from core.rows import insert
from core.tags import Tags, tags_clean
from core.text import counted
from leasing.admission import Admission, admit
from leasing.choices import (
    HoldStatus,
    LeaseEventKind,
    LeaseStatus,
    OfferStatus,
    PriceBasis,
    PricingMode,
    Workload,
)
from leasing.errors import CapacityGone, HoldExpired, InvalidWindow, OfferUnavailable, QuoteExpired
from leasing.hooks import lease_hooks_run
from leasing.locks import allocations_lock, hold_lock
from leasing.models import Allocation, Hold, Lease, Offer, Quote
from leasing.pricing import offer_prices, rate_for, rent_for
from leasing.selectors.windows import window_end
from leasing.services.allocation import allocations_create, place, preemption_cut_time
from leasing.services.changes import allocations_preempt
from leasing.services.history import hold_status_advance, lease_event_record
from leasing.services.lease_contracts import (
    LeaseContractTerms,
    NodeRent,
    lease_contract_create,
    lease_contract_terms,
)
from leasing.services.node_rent import is_node_month, whole_nodes

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
            f"The offer's minimum term is {counted(offer.min_term_hours, 'hour')}.",
            code="below_min_term",
        )
    if is_node_month(offer):
        whole_nodes(offer, gpu_count)
        rent_for(offer_prices(offer), mode=pricing_mode, term_months=term_months)
    else:
        rate_for(offer_prices(offer), mode=pricing_mode, term_months=term_months)  # available?
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


# ---------------------------------------------------------------- leases


def _lease_row(
    *,
    customer: Organization,
    request: LeaseRequest,
    contract: Contract,
    rate: Decimal,
    placement: str,
    hold: Hold | None,
    rent: NodeRent | None,
    workload: str,
    tags: Tags,
    actor: str,
    now: datetime,
) -> Lease:
    """The lease row and the first row of its history."""
    status = (
        LeaseStatus.PENDING_ACCEPTANCE
        if contract.status == ContractStatus.PENDING_ACCEPTANCE
        else LeaseStatus.ACTIVE
    )
    # One fixed INSERT (core.rows.insert is save() of a new row without compiling it).
    lease = insert(
        Lease(
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
            price_per_node_month=rent.per_node_month if rent is not None else None,
            currency=request.offer.currency,
            status=status,
            placement=placement,
            workload=workload,
            tags=tags,
        )
    )
    source = f"hold {hold.pk}" if hold is not None else f"offer {request.offer}"
    waiting = (
        "; billing starts at the first passing acceptance run"
        if status == LeaseStatus.PENDING_ACCEPTANCE
        else ""
    )
    price = (
        f"{rent.explanation}, {counted(rent.nodes, 'whole node')}"
        if rent is not None
        else f"{rate.normalize():f} {lease.currency} per GPU-hour"
    )
    lease_event_record(
        lease,
        kind=LeaseEventKind.CREATED,
        effective_at=now,
        explanation=(
            f"{customer} leased {counted(request.gpu_count, 'GPU')} from {source} "
            f"({request.pricing_mode}, {price}) from "
            f"{request.start:%Y-%m-%d %H:%M} to {request.end:%Y-%m-%d %H:%M} UTC under contract "
            f"{contract.number}; the lease is {status}{waiting}."
        ),
        actor=actor,
        inputs={
            "contract": contract.number,
            "offer_id": request.offer.pk,
            "hold_id": hold.pk if hold is not None else None,
            "gpu_count": request.gpu_count,
            "start": request.start,
            "end": request.end,
            "pricing_mode": request.pricing_mode,
            "term_months": request.term_months,
            "price_per_gpu_hour": rate,
            "price_per_node_month": rent.per_node_month if rent is not None else None,
            "nodes": rent.nodes if rent is not None else None,
            "placement": placement,
            "workload": workload,
            "tags": tags,
        },
        to_status=status,
    )
    return lease


def lease_create(
    *,
    customer: Organization,
    request: LeaseRequest | None = None,
    hold: Hold | None = None,
    quote: Quote | None = None,
    workload: str = Workload.UNSPECIFIED,
    tags: Mapping[str, str] | None = None,
    price_basis: str = PriceBasis.FIXED,
    actor: str,
    now: datetime | None = None,
) -> Lease:
    """Lease from a hold, a quote, or an offer + count + window; creates the contract too.

    `workload` (training, inference or unspecified) is set here once; nothing changes it later.
    So are `tags` (cost attribution, core.tags limits; a lease from a hold without tags of its
    own takes the hold's): invoices already issued are grouped by them, so they never move.
    `price_basis` "index_linked" takes the offer's index-linked option instead of the fixed rate.
    """
    clean_tags = tags_clean(tags)
    now = now or timezone.now()
    if price_basis not in PriceBasis.values:
        raise ValidationFailed(
            f"price_basis is one of {', '.join(PriceBasis.values)}.",
            code="invalid_price_basis",
            detail={"field": "price_basis"},
        )
    if workload not in Workload.values:
        raise ValidationFailed(
            f"workload is one of {', '.join(Workload.values)}.",
            code="invalid_workload",
            detail={"field": "workload"},
        )
    if hold is not None:
        # Priced from the hold as it was placed (offer, count, window and mode never change);
        # checked here and again under its lock.
        _hold_check(hold, customer=customer, now=now)
        held = LeaseRequest(
            hold.offer, hold.gpu_count, hold.start, hold.end, hold.pricing_mode, hold.term_months
        )
        terms = lease_contract_terms(request=held, price_basis=price_basis, now=now)
        with transaction.atomic():
            lease = _lease_from_hold(
                customer=customer,
                hold=hold,
                terms=terms,
                workload=workload,
                tags=clean_tags if tags is not None else None,
                actor=actor,
                now=now,
            )
            lease_hooks_run("created", lease, now)
            return lease
    if quote is not None:
        if quote.customer_id != customer.pk:
            raise Conflict("The quote is not yours.", code="quote_not_yours")
        request = request_from_quote(quote, now=now)
    if request is None:
        raise ValidationFailed("Give a hold, a quote, or an offer and a window.", code="invalid")
    with transaction.atomic():
        admit(
            Admission(
                customer=customer,
                gpu_count=request.gpu_count,
                pricing_mode=request.pricing_mode,
                now=now,
                tags=clean_tags,
            )
        )
        # Everything that needs no GPU is settled before placement locks any (docs/architecture.md,
        # "Leasing"): from the lock to the commit, only placement and the inserts.
        terms = lease_contract_terms(request=request, price_basis=price_basis, now=now)
        lease = _lease_from_request(
            customer=customer,
            request=request,
            terms=terms,
            workload=workload,
            tags=clean_tags,
            actor=actor,
            now=now,
        )
        lease_hooks_run("created", lease, now)
        return lease


def _lease_from_request(
    *,
    customer: Organization,
    request: LeaseRequest,
    terms: LeaseContractTerms,
    workload: str,
    tags: Tags,
    actor: str,
    now: datetime,
) -> Lease:
    interruptible = request.pricing_mode == PricingMode.INTERRUPTIBLE
    contracts: list[Contract] = []

    def contract_write() -> None:
        # A GPU-hour contract names no GPU: written once placement has found GPUs free and before
        # it locks them, so its rows and their Python hold no GPU lock (a whole-server rent needs
        # the placed nodes, so it waits for them).
        contracts.append(
            lease_contract_create(
                customer=customer, request=request, terms=terms, actor=actor, now=now
            )
        )

    placement = place(
        request.offer,
        count=request.gpu_count,
        start=request.start,
        end=request.end,
        preemptible=interruptible,
        now=now,
        before_lock=contract_write if terms.rent_per_node is None else None,
    )
    rent = terms.rent(placement.gpu_ids)
    contract = (
        contracts[0]
        if contracts
        else lease_contract_create(
            customer=customer, request=request, terms=terms, actor=actor, now=now, rent=rent
        )
    )
    lease = _lease_row(
        customer=customer,
        request=request,
        contract=contract,
        rate=terms.rate,
        placement=placement.placement,
        hold=None,
        rent=rent,
        workload=workload,
        tags=tags,
        actor=actor,
        now=now,
    )
    taken_from_interruptible: set[int] = set()
    if placement.preempt:
        cut_at = preemption_cut_time(request.offer, start=request.start, now=now)
        # A GPU whose interruptible booking runs before the cut is handed over at the cut; one
        # whose booking had not begun by then is released outright and is free from the start.
        handover: dict[int, datetime] = {}
        for cut in Allocation.objects.filter(pk__in=placement.preempt).only("gpu_id", "period"):
            when = cut_at if cut.period.lower < cut_at else request.start
            handover[cut.gpu_id] = max(handover.get(cut.gpu_id, request.start), when)
        if max(handover.values()) >= request.end:
            raise CapacityGone(
                "The GPUs free only after the preemption notice runs out, after this window ends.",
                code="preemption_notice_too_long",
                detail={"ready_at": cut_at.isoformat(), "end": request.end.isoformat()},
            )
        taken_from_interruptible = set(handover)
        allocations_preempt(placement.preempt, by=lease, cut_at=cut_at, now=now, actor=actor)
        lease.gpus_ready_at = max(handover.values())
        lease.save(update_fields=["gpus_ready_at", "updated_at"])
        for ready_at in sorted(set(handover.values())):
            allocations_create(
                gpu_ids=sorted(gpu for gpu, when in handover.items() if when == ready_at),
                start=ready_at,
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
        node_of=placement.node_of,
    )
    return lease


def _hold_check(hold: Hold, *, customer: Organization, now: datetime) -> Hold:
    """A hold the customer may turn into a lease now: theirs, active and not expired."""
    if hold.customer_id != customer.pk:
        raise Conflict("The hold is not yours.", code="hold_not_yours")
    if hold.status == HoldStatus.CONVERTED:
        raise Conflict("The hold was already turned into a lease.", code="hold_converted")
    if hold.status != HoldStatus.ACTIVE or hold.expires_at <= now:
        raise HoldExpired(detail={"expired_at": hold.expires_at.isoformat()})
    return hold


def _lease_from_hold(
    *,
    customer: Organization,
    hold: Hold,
    terms: LeaseContractTerms,
    workload: str,
    tags: Tags | None,
    actor: str,
    now: datetime,
) -> Lease:
    hold = _hold_check(hold_lock(hold), customer=customer, now=now)
    # Lock order: the hold, then its allocations, then (a new) contract.
    allocations = allocations_lock(Allocation.objects.filter(hold=hold, released_at__isnull=True))
    request = LeaseRequest(
        hold.offer, hold.gpu_count, hold.start, hold.end, hold.pricing_mode, hold.term_months
    )
    rent = terms.rent([a.gpu_id for a in allocations])
    contract = lease_contract_create(
        customer=customer, request=request, terms=terms, actor=actor, now=now, rent=rent
    )
    node_count = len({allocation.node_id for allocation in allocations})
    lease = _lease_row(
        customer=customer,
        request=request,
        contract=contract,
        rate=terms.rate,
        placement="single_node" if node_count == 1 else "multi_node",
        hold=hold,
        rent=rent,
        workload=workload,
        tags=hold.tags if tags is None else tags,
        actor=actor,
        now=now,
    )
    # The GPUs stay booked without a gap: the hold's rows become the lease's.
    Allocation.objects.filter(pk__in=[a.pk for a in allocations]).update(lease=lease, hold=None)
    hold_status_advance(
        hold,
        to_status=HoldStatus.CONVERTED,
        at=now,
        actor=actor,
        reason=f"it became lease {lease.pk} under contract {contract.number}",
        inputs={"lease_id": lease.pk, "contract": contract.number},
    )
    return lease
