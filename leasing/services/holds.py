"""Holds: specific GPUs reserved for minutes, released by the customer or lapsing on expiry.

Holds cost nothing, so each organization has limits (docs/security.md, "Holds"): GPUs in its
active holds, active holds at once, and holds placed per rolling hour; creation checks them
under the organization's advisory lock, so concurrent requests cannot both pass.

A hold becomes a lease in leasing.services.leases (status `converted`) and lapses in
leasing.services.allocation (`expired`: the beat task every minute, or a placement it is in the
way of); every status change goes through `hold_status_advance`
and writes a row of the hold's history.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from core.errors import Conflict, require_reason
from core.tags import tags_clean
from core.text import counted
from leasing.admission import Admission, admit
from leasing.choices import HoldStatus, LeaseEventKind, PricingMode
from leasing.errors import HoldLimitReached, HoldRateLimited
from leasing.locks import hold_lock, organization_holds_lock
from leasing.models import Hold, HoldLimit, Quote
from leasing.selectors.holds import RATE_WINDOW, hold_limits_of, hold_usage_of
from leasing.services.allocation import allocations_create, hold_allocations_release, place
from leasing.services.history import hold_status_advance, lease_event_record
from leasing.services.leases import LeaseRequest
from leasing.services.node_rent import is_node_month, whole_nodes_placed

DEFAULT_HOLD_TTL = timedelta(minutes=10)


def hold_create(
    *,
    customer: Organization,
    request: LeaseRequest,
    quote: Quote | None = None,
    ttl: timedelta | None = None,
    tags: Mapping[str, str] | None = None,
    actor: str,
    now: datetime | None = None,
) -> Hold:
    """Reserve free GPUs for a short time (holds never preempt: only a lease does).

    `tags` (cost attribution, core.tags limits) pass on to the lease made from the hold.
    """
    clean_tags = tags_clean(tags)
    now = now or timezone.now()
    ttl = ttl or timedelta(
        minutes=getattr(settings, "HOLD_TTL_MINUTES", DEFAULT_HOLD_TTL.seconds // 60)
    )
    with transaction.atomic():
        # Limits first, under the organization's lock, so racing requests see each other's holds.
        organization_holds_lock(customer.pk)
        hold_limits_check(customer=customer, gpu_count=request.gpu_count, now=now)
        admit(
            Admission(
                customer=customer,
                gpu_count=request.gpu_count,
                pricing_mode=request.pricing_mode,
                now=now,
                tags=clean_tags,
            )
        )
        placement = place(
            request.offer,
            count=request.gpu_count,
            start=request.start,
            end=request.end,
            preemptible=True,  # a hold takes only GPUs nobody holds, interruptible or not
        )
        if is_node_month(request.offer):
            whole_nodes_placed(placement.gpu_ids)  # a whole-server hold takes whole nodes
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
            tags=clean_tags,
        )
        allocations_create(
            gpu_ids=placement.gpu_ids,
            start=request.start,
            end=request.end,
            preemptible=request.pricing_mode == PricingMode.INTERRUPTIBLE,
            hold=hold,
            node_of=placement.node_of,
        )
        lease_event_record(
            hold,
            kind=LeaseEventKind.CREATED,
            effective_at=now,
            explanation=(
                f"{customer} held {counted(request.gpu_count, 'GPU')} of offer {request.offer} "
                f"from "
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
                "tags": clean_tags,
            },
            to_status=hold.status,
        )
    return hold


def hold_limits_check(*, customer: Organization, gpu_count: int, now: datetime) -> None:
    """Refuse a hold past the organization's limits: GPUs held at once, active holds at once,
    and holds placed per rolling hour. Run under `organization_holds_lock`."""
    limits = hold_limits_of(customer)
    usage = hold_usage_of(customer, now=now)
    if usage.created_last_hour >= limits.max_per_hour:
        oldest = usage.oldest_in_window or now
        retry_after = max(1, math.ceil((oldest + RATE_WINDOW - now).total_seconds()))
        raise HoldRateLimited(
            f"{customer} placed {counted(usage.created_last_hour, 'hold')} in the last hour; "
            f"the limit is "
            f"{limits.max_per_hour} per hour. Retry in {retry_after} s.",
            retry_after_seconds=retry_after,
            detail={"limit": limits.max_per_hour, "used": usage.created_last_hour},
        )
    if usage.active_holds >= limits.max_active:
        raise HoldLimitReached(
            f"{customer} has {counted(usage.active_holds, 'active hold')}; the limit is "
            f"{limits.max_active}. Release one or turn it into a lease.",
            code="hold_limit_active",
            detail={"limit": limits.max_active, "active": usage.active_holds},
        )
    if usage.held_gpus + gpu_count > limits.max_gpus:
        raise HoldLimitReached(
            f"{customer} holds {counted(usage.held_gpus, 'GPU')}; {gpu_count} more would pass "
            f"the limit of {counted(limits.max_gpus, 'GPU')} in holds at once.",
            code="hold_limit_gpus",
            detail={
                "limit": limits.max_gpus,
                "held": usage.held_gpus,
                "requested": gpu_count,
            },
        )


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


@transaction.atomic
def hold_limit_set(
    *,
    organization: Organization,
    max_gpus: int | None,
    max_active: int | None,
    max_per_hour: int | None,
    reason: str,
    actor: str,
) -> HoldLimit:
    """Set an operator's override of one organization's hold limits (empty: the setting). It
    applies to holds placed from now on; holds already placed keep running to their expiry."""
    require_reason(reason, "Say why this organization gets other limits.")
    limit = HoldLimit.objects.filter(organization=organization).first() or HoldLimit(
        organization=organization
    )
    limit.max_gpus, limit.max_active, limit.max_per_hour = max_gpus, max_active, max_per_hour
    limit.reason = reason.strip()
    limit._change_reason = f"{actor}: {limit.reason}"  # type: ignore[attr-defined]
    limit.save()
    return limit


@transaction.atomic
def hold_limit_clear(*, organization: Organization, actor: str) -> None:
    """Remove an organization's override: the settings apply again (its history is kept)."""
    for limit in HoldLimit.objects.filter(organization=organization):
        limit._change_reason = f"{actor}: back to the settings"  # type: ignore[attr-defined]
        limit.delete()
