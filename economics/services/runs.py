"""The nightly economics job: asset months and payback of every node, then capacity signals."""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from economics.models import EconomicsRun
from economics.services.assets import asset_economics_refresh
from economics.services.signals import capacity_signals_evaluate

logger = logging.getLogger(__name__)


def economics_run(*, now: datetime | None = None) -> EconomicsRun:
    """The nightly job: asset months and payback of every node, then the capacity signals."""
    started = timezone.now()
    now = now or started
    nodes, months, unattributed = asset_economics_refresh(now=now)
    signals = capacity_signals_evaluate(now=now)
    raised = sum(1 for signal in signals if signal.raised)
    if unattributed:
        logger.warning("economics: %d revenue line part(s) not attributed", len(unattributed))
    return EconomicsRun.objects.create(
        started_at=started,
        finished_at=timezone.now(),
        nodes=nodes,
        months=months,
        signals_raised=raised,
        unattributed=unattributed,
    )
