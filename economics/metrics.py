"""Economics' business metrics for /metrics: the latest nightly capacity-signal evaluation."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Subquery
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from core.metrics import timestamp_seconds
from economics.models import CapacitySignal

POOL_LABELS = ["provider", "site", "gpu_model"]


def business_metrics(now: datetime) -> list[Metric]:
    """The pools the latest evaluation raised, their utilization, and when it ran (one query)."""
    raised = GaugeMetricFamily(
        "cardhour_capacity_signal_raised",
        "1 when the latest nightly evaluation raised a capacity signal for the pool, else 0.",
        labels=[*POOL_LABELS, "level"],
    )
    utilization = GaugeMetricFamily(
        "cardhour_capacity_signal_utilization_ratio",
        "Trailing-week utilization of the pool in the latest nightly evaluation.",
        labels=POOL_LABELS,
    )
    evaluated = GaugeMetricFamily(
        "cardhour_capacity_signals_evaluated_timestamp_seconds",
        "The day (00:00 UTC) of the latest capacity-signal evaluation (0: never).",
    )
    latest_day = CapacitySignal.objects.order_by("-evaluated_on").values("evaluated_on")[:1]
    signals = (
        CapacitySignal.objects.filter(evaluated_on=Subquery(latest_day))
        .values_list(
            "provider__slug",
            "site__name",
            "gpu_model__slug",
            "level",
            "raised",
            "utilization",
            "evaluated_on",
        )
        .order_by("provider__slug", "site__name", "gpu_model__slug")
    )
    evaluated_on = None
    for provider, site, gpu_model, level, is_raised, ratio, day in signals:
        raised.add_metric([provider, site, gpu_model, level], 1.0 if is_raised else 0.0)
        if ratio is not None:
            utilization.add_metric([provider, site, gpu_model], float(ratio))
        evaluated_on = day
    day_start = (
        datetime.combine(evaluated_on, datetime.min.time(), tzinfo=UTC) if evaluated_on else None
    )
    evaluated.add_metric([], timestamp_seconds(day_start))
    return [raised, utilization, evaluated]
