"""Capacity signals: each pool's trailing week of utilization and of quotes refused."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.events import emit
from core.text import counted
from economics import payback
from economics.models import CapacitySignal, SignalLevel
from economics.selectors.gpu_hours import HOUR, HOURS, gpu_seconds
from inventory.models import Node
from leasing.models import QuoteShortfall

ZERO = Decimal("0")


def capacity_signals_evaluate(*, now: datetime | None = None) -> list[CapacitySignal]:
    """Each pool (GPU model x site) over the trailing week: utilization level and unmet quotes.

    Thresholds come from ECONOMICS_PLAN_SCALING_UTILIZATION_PCT (70) and
    ECONOMICS_ACT_NOW_UTILIZATION_PCT (90). Unmet quotes are quote requests for the pool's GPU
    model refused for lack of capacity; they are "growing" when the last week saw more than the
    week before. Re-evaluating the same day replaces that day's rows.
    """
    now = now or timezone.now()
    window_start, window_end = now - timedelta(days=7), now
    plan = Decimal(settings.ECONOMICS_PLAN_SCALING_UTILIZATION_PCT) / 100
    act = Decimal(settings.ECONOMICS_ACT_NOW_UTILIZATION_PCT) / 100
    nodes = list(
        Node.objects.exclude(status="retired")
        .select_related("site")
        .values_list("pk", "site_id", "site__organization_id", "gpu_model_id", "gpu_count")
    )
    seconds = gpu_seconds(
        node_ids=[row[0] for row in nodes],
        now=now,
        step="7 days",
        start=window_start,
        end=window_end,
    )
    pools: dict[tuple[int, int, int], list[Any]] = {}
    pool_of = {}
    for node_id, site_id, provider_id, model_id, gpu_count in nodes:
        pool_of[node_id] = pools.setdefault((site_id, model_id, provider_id), [0, ZERO, ZERO])
        pool_of[node_id][0] += gpu_count
    for (node_id, _), value in seconds.items():
        pool_of[node_id][1] += value.available
        pool_of[node_id][2] += value.allocated
    unmet = _unmet_quotes(now)
    signals = []
    for (site_id, model_id, provider_id), (gpu_count, available, allocated) in pools.items():
        utilization = payback.ratio(
            allocated, available, reason="no_available_gpu_hours", places=payback.FRACTION
        )
        level = SignalLevel.OK
        reasons = []
        if utilization.value is not None and utilization.value >= act:
            level = SignalLevel.ACT_NOW
        elif utilization.value is not None and utilization.value >= plan:
            level = SignalLevel.PLAN_SCALING
        if level != SignalLevel.OK:
            reasons.append(
                f"utilization {utilization.value:.1%} over the last 7 days "
                f"(plan scaling at {plan:.0%}, act now at {act:.0%})"
            )
        recent, before = unmet.get(model_id, (0, 0))
        growing = recent > before
        if growing:
            reasons.append(
                f"{counted(recent, 'quote request')} found no capacity in the last 7 days "
                f"against {before} the week before"
            )
        signals.append(
            CapacitySignal(
                provider_id=provider_id,
                site_id=site_id,
                gpu_model_id=model_id,
                evaluated_on=now.date(),
                window_start=window_start,
                window_end=window_end,
                gpu_count=gpu_count,
                available_gpu_hours=(available / HOUR).quantize(HOURS),
                allocated_gpu_hours=(allocated / HOUR).quantize(HOURS),
                utilization=utilization.value,
                level=level,
                unmet_quotes=recent,
                unmet_quotes_before=before,
                unmet_growing=growing,
                raised=level != SignalLevel.OK or growing,
                reasons=reasons,
                computed_at=now,
            )
        )
    with transaction.atomic():
        today = CapacitySignal.objects.filter(evaluated_on=now.date())
        # A re-evaluation of the day tells a provider only about pools newly raised.
        already = set(today.filter(raised=True).values_list("site_id", "gpu_model_id"))
        today.delete()
        created = CapacitySignal.objects.bulk_create(signals)
        for signal in created:
            if signal.raised and (signal.site_id, signal.gpu_model_id) not in already:
                _raised_webhook(signal)
        return created


def _raised_webhook(signal: CapacitySignal) -> None:
    """The provider's capacity_signal.raised event, in the evaluation's transaction."""
    emit(
        organization_id=signal.provider_id,
        type="capacity_signal.raised",
        data={
            "capacity_signal_id": signal.pk,
            "site_id": signal.site_id,
            "gpu_model": signal.gpu_model_id,
            "evaluated_on": signal.evaluated_on,
            "level": signal.level,
            "utilization": signal.utilization,
            "unmet_quotes": signal.unmet_quotes,
            "unmet_quotes_before": signal.unmet_quotes_before,
            "unmet_growing": signal.unmet_growing,
            "reasons": signal.reasons,
        },
        occurred_at=signal.computed_at,
    )


def _unmet_quotes(now: datetime) -> dict[int, tuple[int, int]]:
    """Refused quote requests per GPU model: (last 7 days, the 7 days before)."""
    week = timedelta(days=7)
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    rows = QuoteShortfall.objects.filter(
        requested_at__gte=now - 2 * week, requested_at__lt=now
    ).values_list("gpu_model_id", "requested_at")
    for model_id, requested_at in rows:
        counts[model_id][0 if requested_at >= now - week else 1] += 1
    return {model_id: (recent, before) for model_id, (recent, before) in counts.items()}
