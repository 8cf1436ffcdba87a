"""Thin Celery tasks of economics; each calls a service and is safe to rerun.

The nightly job runs on the `billing` queue, with the rest of the batch work over billing's
data (the worker deployment is unchanged by economics having its own app).
"""

from __future__ import annotations

from celery import shared_task
from django.utils.dateparse import parse_datetime

from economics.services.runs import economics_run


@shared_task(name="economics.refresh", queue="billing")
def refresh(as_of: str | None = None) -> int:
    """Nightly: every node's months and payback, then the capacity signals; returns the run id."""
    return economics_run(now=parse_datetime(as_of) if as_of else None).pk
