"""Thin Celery tasks of the inventory app; each calls a service and is safe to rerun."""

from __future__ import annotations

from datetime import UTC, timedelta

from celery import shared_task
from django.utils import timezone
from django.utils.dateparse import parse_date

from inventory.services.index import index_fixings_compute


@shared_task(name="inventory.fix_indices")  # queue: CELERY_TASK_ROUTES (default)
def fix_indices(day: str | None = None) -> int:
    """Beat, shortly after midnight UTC: fix the market index of the day that ended (or `day`).

    A day fixed already writes nothing again; returns how many fixings were written.
    """
    target = parse_date(day) if day else None
    if target is None:
        target = timezone.now().astimezone(UTC).date() - timedelta(days=1)
    return len(index_fixings_compute(day=target).created)
