"""Thin Celery tasks of the leasing app."""

from __future__ import annotations

from datetime import UTC, timedelta

from celery import shared_task
from django.utils import timezone
from django.utils.dateparse import parse_date

from leasing.services.acceptance import acceptance_claims_resolve
from leasing.services.allocation import expired_holds_release
from leasing.services.changes import leases_end_due, preemptions_execute
from leasing.services.market_index import marketplace_index_compute
from leasing.services.pool_sums import pool_sizes_compact
from leasing.services.resale import resale_listings_expire


@shared_task(name="leasing.expire_holds")
def expire_holds() -> int:
    """Lapse holds past their expiry so their GPUs are free again (reservations also do this)."""
    return expired_holds_release(now=timezone.now())


@shared_task(name="leasing.end_due_leases")
def end_due_leases() -> int:
    """Mark leases whose window is over as ended."""
    return leases_end_due()


@shared_task(name="leasing.resolve_acceptance_claims")
def resolve_acceptance_claims() -> int:
    """Apply the acceptance clause's rule on silence to provider claims whose window passed."""
    return acceptance_claims_resolve(now=timezone.now())


@shared_task(name="leasing.execute_preemptions")
def execute_preemptions() -> int:
    """End or shrink the interruptible leases whose preemption cut has passed."""
    return preemptions_execute(now=timezone.now())


@shared_task(name="leasing.expire_resale_listings")
def expire_resale_listings() -> int:
    """Expire unsold resale listings whose window has begun, releasing their GPU-time."""
    return resale_listings_expire(now=timezone.now())


@shared_task(name="leasing.compact_pool_sizes")
def compact_pool_sizes() -> int:
    """Beat, every 10 minutes: fold the pool sizes' change rows into one row per pool key (the
    sums capacity search reads are unchanged); returns how many rows there are fewer."""
    return pool_sizes_compact()


@shared_task(name="leasing.fix_marketplace_index")  # queue: CELERY_TASK_ROUTES (default)
def fix_marketplace_index(day: str | None = None) -> int:
    """Beat, 00:20 UTC (after the external index): fix the marketplace index of the day that
    ended (or `day`). A day fixed already writes nothing again; returns how many were written."""
    target = parse_date(day) if day else None
    if target is None:
        target = timezone.now().astimezone(UTC).date() - timedelta(days=1)
    return len(marketplace_index_compute(day=target).created)
