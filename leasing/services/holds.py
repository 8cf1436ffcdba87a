"""Holds: specific GPUs reserved for minutes, released by the customer or lapsing on expiry.

A hold becomes a lease in leasing.services.leases (status `converted`) and lapses in
leasing.services.allocation (`expired`); every status change goes through `hold_status_advance`
and writes a row of the hold's history.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from core.errors import Conflict
from leasing.choices import HoldStatus, LeaseEventKind, PricingMode
from leasing.locks import hold_lock
from leasing.models import Hold, Quote
from leasing.services.allocation import (
    allocations_create,
    expired_holds_release,
    hold_allocations_release,
    place,
)
from leasing.services.history import hold_event_record, hold_status_advance
from leasing.services.leases import LeaseRequest

DEFAULT_HOLD_TTL = timedelta(minutes=10)


def hold_create(
    *,
    customer: Organization,
    request: LeaseRequest,
    quote: Quote | None = None,
    ttl: timedelta | None = None,
    actor: str,
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
        hold_event_record(
            hold,
            kind=LeaseEventKind.CREATED,
            effective_at=now,
            explanation=(
                f"{customer} held {request.gpu_count} GPU(s) of offer {request.offer} from "
                f"{request.start:%Y-%m-%d %H:%M} to {request.end:%Y-%m-%d %H:%M} UTC "
                f"({request.pricing_mode}) until {hold.expires_at:%Y-%m-%d %H:%M} UTC."
            ),
            actor=actor,
            inputs={
                "offer_id": request.offer.pk,
                "gpu_ids": placement.gpu_ids,
                "placement": placement.placement,
                "quote_id": quote.pk if quote is not None else None,
                "expires_at": hold.expires_at,
            },
            to_status=hold.status,
        )
    return hold


@transaction.atomic
def hold_release(*, hold: Hold, actor: str, now: datetime | None = None) -> Hold:
    """Give a hold's GPUs back before it expires."""
    now = now or timezone.now()
    hold = hold_lock(hold)
    if hold.status != HoldStatus.ACTIVE:
        raise Conflict(f"The hold is {hold.status}.", code="hold_not_active")
    freed = hold_allocations_release(hold, at=now)
    return hold_status_advance(
        hold,
        to_status=HoldStatus.RELEASED,
        at=now,
        actor=actor,
        reason="the customer gave its GPUs back before the hold expired",
        inputs={"gpus_freed": freed},
    )
