"""Thin Celery tasks of billing; each calls a service and is safe to rerun.

Queues come from CELERY_TASK_ROUTES: `billing.ingest_*` runs on `ingest`, the rest on `billing`.
"""

from __future__ import annotations

from celery import shared_task
from django.utils.dateparse import parse_datetime

from billing.services.rollups import usage_rollups_refresh, usage_rollups_refresh_batch


@shared_task(name="billing.rollup_usage")
def rollup_usage(since: str | None = None) -> int:
    """Periodic sweep: refresh the hourly rollups touched by events received since the last run."""
    run = usage_rollups_refresh(since=parse_datetime(since) if since else None)
    return run.hours_refreshed


@shared_task(name="billing.ingest_rollup_refresh")
def ingest_rollup_refresh(batch_id: int) -> int:
    """Right after a batch committed: refresh the hourly rollups its events touched."""
    return usage_rollups_refresh_batch(batch_id=batch_id)
