"""Leasing's business metrics for /metrics: pool utilization right now, leases by status."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from core.metrics import status_gauge
from inventory.choices import NodeStatus
from inventory.models import Node
from leasing.models import Allocation, Lease

POOL_LABELS = ["provider", "site", "gpu_model"]


def _pool_metrics(now: datetime) -> list[Metric]:
    """GPUs of non-retired nodes per pool (provider, site, model), and those held by leases now."""
    gpus = GaugeMetricFamily(
        "cardhour_pool_gpus", "GPUs in non-retired nodes of the pool.", labels=POOL_LABELS
    )
    allocated = GaugeMetricFamily(
        "cardhour_pool_gpus_allocated",
        "GPUs of the pool held right now by live lease allocations.",
        labels=POOL_LABELS,
    )
    utilization = GaugeMetricFamily(
        "cardhour_pool_utilization_ratio",
        "Allocated GPUs / GPUs of the pool (site x GPU model), right now.",
        labels=POOL_LABELS,
    )
    busy_gpus_of_node = (
        Allocation.objects.filter(
            node=OuterRef("pk"), lease__isnull=False, released_at__isnull=True, period__contains=now
        )
        .order_by()
        .values("node")
        .annotate(gpus=Count("gpu", distinct=True))
        .values("gpus")
    )
    pools = (
        Node.objects.exclude(status=NodeStatus.RETIRED)
        .annotate(busy=Coalesce(Subquery(busy_gpus_of_node), Value(0), output_field=IntegerField()))
        .values_list("site__organization__slug", "site__name", "gpu_model__slug")
        .annotate(total=Sum("gpu_count"), held=Sum("busy"))
        .order_by("site__organization__slug", "site__name", "gpu_model__slug")
    )
    for provider, site, gpu_model, total, held in pools:
        labels = [provider, site, gpu_model]
        gpus.add_metric(labels, float(total))
        allocated.add_metric(labels, float(held))
        utilization.add_metric(labels, float(held) / float(total) if total else 0.0)
    return [gpus, allocated, utilization]


def business_metrics(now: datetime) -> list[Metric]:
    """Every leasing metric as of `now` (two aggregate queries)."""
    return [
        *_pool_metrics(now),
        status_gauge("cardhour_leases", "Leases, by status.", Lease),
    ]
