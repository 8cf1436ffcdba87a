"""Resale of leased time: list GPUs of a reserved lease for a future window, withdraw, consent,
and buy (a sublease whose allocations nest inside the seller's).

The invariants are the database's (docs/architecture.md, "Resale"): a listing reserves its
GPU-time with nested allocations (`allocation_nested_no_double_booking` refuses a second listing
or a second buyer of the same GPU-time, the trigger `allocation_nested_within_parent` keeps each
inside the seller's allocation). Locks: the parent lease, then the listing, then allocations,
then contracts (leasing.locks). Every change writes a lease event on the parent lease.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from datetime import datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone

from accounts.errors import Forbidden
from accounts.models import Organization
from contracts import engine
from contracts.choices import ClauseKind, EventKind
from contracts.schemas import Assignment
from contracts.selectors import contract_terms
from contracts.services import contract_activate, contract_create, event_record
from core.errors import Conflict, SemanticError
from core.money import round_rate
from core.text import counted
from leasing.admission import Admission, admit
from leasing.choices import (
    RESALE_TRANSITIONS,
    UNSOLD_RESALE_STATUSES,
    LeaseEventKind,
    LeaseStatus,
    PricingMode,
    ResaleStatus,
)
from leasing.errors import InvalidWindow
from leasing.hooks import lease_hooks_run, sublease_hooks_run
from leasing.locks import allocations_lock, lease_lock, resale_listing_lock
from leasing.models import Allocation, Lease, ResaleListing
from leasing.selectors.windows import START_SKEW
from leasing.services.allocation import gpus_choose
from leasing.services.history import lease_event_record
from leasing.services.resale_parent import listing_close, nested_rows_lock

# The parent contract's clauses a buyer's contract carries over (hardware replacement is part
# of the exit terms): the buyer steps into the seller's service terms, not its commercial ones.
PASS_THROUGH_CLAUSES = (ClauseKind.SLA_CREDITS, ClauseKind.EXIT_TERMS)


class ResaleGpusUnavailable(Conflict):
    """Fewer of the lease's GPUs are free of other listings for the whole window (409)."""

    code = "resale_gpus_unavailable"


class ListingNotAvailable(Conflict):
    """The listing is not buyable: sold, withdrawn, awaiting consent or already started (409)."""

    code = "listing_not_available"


def _fmt(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def _status_move(listing: ResaleListing, to_status: str) -> str:
    """Guard a listing's status change by the transition map; returns the old status."""
    old = listing.status
    if to_status not in RESALE_TRANSITIONS[old]:
        raise Conflict(
            f"A {old} listing cannot become {to_status}.",
            code="listing_not_available" if to_status == ResaleStatus.SOLD else "listing_closed",
            detail={"status": old},
        )
    listing.status = to_status
    return old


def _free_parent_rows(lease: Lease, *, start: datetime, end: datetime) -> dict[int, list[int]]:
    """The lease's GPUs held for the whole window and not listed in it: GPU ids per node."""
    window = DateTimeTZRange(start, end, "[)")
    rows = allocations_lock(
        Allocation.objects.filter(
            lease=lease, parent__isnull=True, released_at__isnull=True, period__contains=window
        )
    )
    listed = set(
        Allocation.objects.filter(
            parent__in=[row.pk for row in rows], released_at__isnull=True, period__overlap=window
        ).values_list("parent_id", flat=True)
    )
    by_node: dict[int, list[int]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r.node_id, r.gpu_id)):
        if row.pk not in listed:
            by_node[row.node_id].append(row.gpu_id)
    return by_node


@transaction.atomic
def resale_listing_create(
    *,
    seller: Organization,
    parent_lease: Lease,
    gpu_count: int,
    start: datetime,
    end: datetime,
    ask_price_per_gpu_hour: Decimal,
    currency: str,
    actor: str,
    now: datetime | None = None,
) -> ResaleListing:
    """List `gpu_count` GPUs of the seller's active reserved lease for a future window inside
    it, under the contract's assignment clause; the listing reserves that GPU-time at once."""
    now = now or timezone.now()
    lease = lease_lock(parent_lease)
    if lease.customer_id != seller.pk:
        raise Forbidden("Only the lessee can resell its lease's time.", code="lessee_only")
    if (
        lease.status != LeaseStatus.ACTIVE
        or lease.pricing_mode != PricingMode.RESERVED
        or lease.parent_lease_id is not None
        or lease.price_per_node_month is not None
    ):
        raise engine.ResaleNotAllowed(
            "Only the GPU-hours of an active reserved lease (not a sublease) can be resold.",
            detail={"status": lease.status, "pricing_mode": lease.pricing_mode},
        )
    terms = engine.resale_terms(
        contract_terms(lease.contract).clause(Assignment),
        parent_rate=lease.contract.base_rate_per_gpu_hour or lease.price_per_gpu_hour,
        parent_currency=lease.contract.currency,
        ask=ask_price_per_gpu_hour,
        currency=currency,
        start=start,
        end=end,
    )
    if start < now:
        raise InvalidWindow("A resale window must start in the future.", code="window_in_past")
    if start < lease.start or end > lease.end:
        raise SemanticError(
            f"The window must lie inside the lease ({_fmt(lease.start)} to {_fmt(lease.end)}).",
            code="window_outside_lease",
            detail={"lease_start": lease.start, "lease_end": lease.end},
        )
    free = _free_parent_rows(lease, start=start, end=end)
    choice = gpus_choose(free, gpu_count)
    if choice is None:
        available = sum(len(ids) for ids in free.values())
        raise ResaleGpusUnavailable(
            f"Only {counted(available, 'GPU')} of this lease can be listed for the whole window.",
            detail={"available": available, "requested": gpu_count},
        )
    gpu_ids, _ = choice
    listing = ResaleListing.objects.create(
        seller=seller,
        parent_lease=lease,
        gpu_count=gpu_count,
        start=start,
        end=end,
        ask_price_per_gpu_hour=round_rate(ask_price_per_gpu_hour),
        currency=lease.contract.currency,
        status=ResaleStatus.PENDING_CONSENT if terms.consent_required else ResaleStatus.OPEN,
        consent_required=terms.consent_required,
        provider_share_pct=terms.provider_share_pct,
        marketplace_fee_pct=terms.marketplace_fee_pct,
        price_floor_pct=terms.price_floor_pct,
        floor_rate=terms.floor_rate,
        on_parent_end=terms.on_parent_end,
    )
    parents = Allocation.objects.filter(
        lease=lease, parent__isnull=True, released_at__isnull=True, gpu_id__in=gpu_ids
    )
    rows = [
        Allocation(
            gpu_id=row.gpu_id,
            node_id=row.node_id,
            parent=row,
            listing=listing,
            period=DateTimeTZRange(start, end, "[)"),
        )
        for row in parents.filter(period__contains=DateTimeTZRange(start, end, "[)"))
    ]
    try:
        with transaction.atomic():
            Allocation.objects.bulk_create(rows)
    except IntegrityError as exc:
        raise ResaleGpusUnavailable(
            "These GPUs were listed for an overlapping window at the same moment; try again.",
            detail={"requested": gpu_count},
        ) from exc
    lease_event_record(
        lease,
        kind=LeaseEventKind.RESALE_LISTED,
        effective_at=now,
        explanation=(
            f"{counted(gpu_count, 'GPU')} listed for resale from {_fmt(start)} to {_fmt(end)} "
            f"(listing {listing.pk}, {listing.status}). {terms.explanation}"
        ),
        actor=actor,
        inputs={"listing_id": listing.pk, "gpu_ids": sorted(gpu_ids), **asdict(terms)},
    )
    return listing


@transaction.atomic
def resale_listing_withdraw(
    *, listing: ResaleListing, actor: str, now: datetime | None = None
) -> ResaleListing:
    """Take an unsold listing back: its GPU-time returns to the seller's own use."""
    now = now or timezone.now()
    lease = lease_lock(listing.parent_lease_id)
    listing = resale_listing_lock(listing)
    old = _status_move(listing, ResaleStatus.WITHDRAWN)
    listing_close(listing, lease=lease, old_status=old, actor=actor, now=now, reason="withdrawn")
    return listing


def resale_listings_expire(*, now: datetime | None = None) -> int:
    """Expire the unsold listings (open or awaiting consent) whose window has begun: their
    GPU-time returns to the seller, as on a withdrawal. Idempotent; returns how many expired."""
    now = now or timezone.now()
    due = ResaleListing.objects.filter(status__in=UNSOLD_RESALE_STATUSES, start__lte=now)
    expired = 0
    for pk, lease_id in due.order_by("pk").values_list("pk", "parent_lease_id"):
        with transaction.atomic():
            lease = lease_lock(lease_id)
            listing = resale_listing_lock(pk)
            if listing.status not in UNSOLD_RESALE_STATUSES or listing.start > now:
                continue  # sold or closed meanwhile
            old = _status_move(listing, ResaleStatus.EXPIRED)
            listing_close(
                listing,
                lease=lease,
                old_status=old,
                actor="system:resale",
                now=now,
                reason="expired unsold (its window began)",
            )
            expired += 1
    return expired


@transaction.atomic
def resale_listing_consent(
    *, listing: ResaleListing, actor: str, now: datetime | None = None
) -> ResaleListing:
    """The provider consents to a listing that needs it: it becomes buyable."""
    now = now or timezone.now()
    lease = lease_lock(listing.parent_lease_id)
    listing = resale_listing_lock(listing)
    if listing.status != ResaleStatus.PENDING_CONSENT:
        raise Conflict(
            "The listing is not awaiting consent.",
            code="listing_not_awaiting_consent",
            detail={"status": listing.status},
        )
    old = _status_move(listing, ResaleStatus.OPEN)
    listing.consented_at = now
    listing.consented_by = actor
    listing.save(update_fields=["status", "consented_at", "consented_by"])
    lease_event_record(
        lease,
        kind=LeaseEventKind.RESALE_CONSENTED,
        effective_at=now,
        explanation=f"The provider consented to resale listing {listing.pk}; it is buyable.",
        actor=actor,
        inputs={"listing_id": listing.pk, "from": old, "to": listing.status},
    )
    return listing


def _pass_through(lease: Lease) -> list[dict[str, object]]:
    return [
        {"kind": clause.kind, **clause.params}
        for clause in lease.contract.clauses.all()
        if clause.kind in PASS_THROUGH_CLAUSES
    ]


def assignment_facts(listing: ResaleListing) -> dict[str, object]:
    """What billing needs to split a sublease's payments, as stored on the contract events."""
    parent = listing.parent_lease
    return {
        "listing_id": listing.pk,
        "parent_lease_id": parent.pk,
        "parent_contract": parent.contract.number,
        "seller_id": listing.seller_id,
        "provider_id": parent.offer.provider_id,
        "gpu_count": listing.gpu_count,
        "start": listing.start,
        "end": listing.end,
        "ask_price_per_gpu_hour": listing.ask_price_per_gpu_hour,
        "currency": listing.currency,
        "provider_share_pct": listing.provider_share_pct,
        "marketplace_fee_pct": listing.marketplace_fee_pct,
        "on_parent_end": listing.on_parent_end,
    }


@transaction.atomic
def resale_listing_buy(
    *, listing: ResaleListing, buyer: Organization, actor: str, now: datetime | None = None
) -> Lease:
    """Buy an open listing whole: a sublease for the buyer on exactly the listed GPU-time, with
    its own contract (rate = ask, the parent's pass-through clauses); the seller's lease and its
    billing are unchanged."""
    now = now or timezone.now()
    parent = lease_lock(listing.parent_lease_id)
    listing = resale_listing_lock(listing)
    if listing.status != ResaleStatus.OPEN:
        raise ListingNotAvailable(
            f"The listing is {listing.status}.", detail={"status": listing.status}
        )
    if buyer.pk in (listing.seller_id, parent.offer.provider_id):
        raise SemanticError(
            "The seller and the provider cannot buy this listing.", code="own_listing"
        )
    if parent.status != LeaseStatus.ACTIVE or listing.start < now - START_SKEW:
        raise ListingNotAvailable(
            "The listing's window has begun or its lease is no longer active.",
            detail={"lease_status": parent.status},
        )
    admit(
        Admission(
            customer=buyer,
            gpu_count=listing.gpu_count,
            pricing_mode=PricingMode.RESERVED,
            now=now,
        )
    )
    facts = assignment_facts(listing)
    contract = contract_create(
        lessor=parent.offer.provider,
        lessee=buyer,
        term_start=listing.start,
        term_end=listing.end,
        currency=listing.currency,
        pricing_basis="card_hour",
        base_rate_per_gpu_hour=listing.ask_price_per_gpu_hour,
        committed_gpus=listing.gpu_count,
        leased_model_slug=parent.contract.leased_model_slug,
        reference_market_rate=parent.contract.reference_market_rate,
        clauses=_pass_through(parent),
        actor=actor,
        at=now,
    )
    contract = contract_activate(contract=contract, actor=actor, at=max(now, listing.start))
    sublease = Lease.objects.create(
        customer=buyer,
        offer=parent.offer,
        contract=contract,
        gpu_count=listing.gpu_count,
        start=listing.start,
        end=listing.end,
        pricing_mode=PricingMode.RESERVED,
        price_per_gpu_hour=listing.ask_price_per_gpu_hour,
        currency=listing.currency,
        status=LeaseStatus.ACTIVE,
        placement=parent.placement,
        parent_lease=parent,
    )
    rows = nested_rows_lock(listing)
    if len(rows) != listing.gpu_count:
        raise ListingNotAvailable("The listing no longer holds all its GPUs.")
    Allocation.objects.filter(pk__in=[row.pk for row in rows]).update(lease=sublease)
    _status_move(listing, ResaleStatus.SOLD)
    listing.sublease = sublease
    listing.sold_at = now
    listing.save(update_fields=["status", "sublease", "sold_at"])
    sentence = (
        f"{counted(listing.gpu_count, 'GPU')} of lease {parent.pk} resold to {buyer} from "
        f"{_fmt(listing.start)} to {_fmt(listing.end)} at "
        f"{listing.ask_price_per_gpu_hour.normalize():f} {listing.currency} per GPU-hour "
        f"(listing {listing.pk}); the provider's share is "
        f"{listing.provider_share_pct.normalize():f} %, the marketplace fee "
        f"{listing.marketplace_fee_pct.normalize():f} %."
    )
    for each in (parent.contract, contract):
        event_record(
            each,
            kind=EventKind.RESALE,
            effective_at=now,
            explanation=sentence,
            actor=actor,
            inputs=facts,
            rate=listing.ask_price_per_gpu_hour,
            dedupe_key=f"resale:{listing.pk}",
        )
    lease_event_record(
        parent,
        kind=LeaseEventKind.RESALE_SOLD,
        effective_at=now,
        explanation=sentence,
        actor=actor,
        inputs={**facts, "sublease_id": sublease.pk},
    )
    lease_event_record(
        sublease,
        kind=LeaseEventKind.CREATED,
        effective_at=now,
        explanation=f"A sublease under contract {contract.number}: {sentence}",
        actor=actor,
        inputs={**facts, "contract": contract.number},
        to_status=LeaseStatus.ACTIVE,
    )
    lease_hooks_run("created", sublease, now)
    sublease_hooks_run("sold", listing, now)
    return sublease
