"""GET /metrics: business metrics read from the database at scrape time, in Prometheus format.

Nothing is counted in process memory: each scrape runs a fixed handful of aggregate queries
(pinned by a test), so any gunicorn worker answers with the same numbers and no multi-process
store is needed. The process metrics (CPU, memory, file descriptors, GC) are those of the worker
that answered.

core imports no other app and reads none of their tables: each app registers the source of its
own business metrics (`<app>/metrics.py`) from its `AppConfig.ready()` with
`register_business_metrics`; a scrape runs every registered source, in registration order,
inside one short read-only transaction with a statement timeout.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Model
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

logger = logging.getLogger(__name__)

# A scrape that takes longer is cut off by the database rather than tie up a web worker.
STATEMENT_TIMEOUT_MS = 5000

MetricSource = Callable[[datetime], Iterable[Metric]]

_SOURCES: dict[str, MetricSource] = {}


def register_business_metrics(app_label: str, source: MetricSource) -> None:
    """Add an app's business metrics to every scrape (called from its AppConfig.ready())."""
    _SOURCES[app_label] = source


def registered_sources() -> Mapping[str, MetricSource]:
    """The business-metric sources, by app label, in registration order."""
    return dict(_SOURCES)


def timestamp_seconds(value: datetime | None) -> float:
    """A Prometheus timestamp gauge value: seconds since the epoch, 0 for never."""
    return value.timestamp() if value is not None else 0.0


def status_gauge(name: str, documentation: str, model: type[Model]) -> Metric:
    """Rows of `model` by status, every status of its choices included (0 when it has none)."""
    counts = {
        str(row["status"]): row["rows"]
        for row in model._default_manager.order_by().values("status").annotate(rows=Count("pk"))
    }
    choices = getattr(model._meta.get_field("status"), "choices", None) or []
    family = GaugeMetricFamily(name, documentation, labels=["status"])
    for status in sorted({*(str(value) for value, _ in choices), *counts}):
        family.add_metric([status], float(counts.get(status, 0)))
    return family


def business_metrics(*, now: datetime) -> list[Metric]:
    """Every registered app's business metrics as of `now`, in one short transaction."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, true)", [str(STATEMENT_TIMEOUT_MS)]
            )
        families: list[Metric] = []
        for source in _SOURCES.values():
            families.extend(source(now))
        return families


class BusinessCollector:
    """Reads the business metrics on every scrape; without describe(), registering runs none."""

    def collect(self) -> Iterable[Metric]:
        started = time.perf_counter()
        up = GaugeMetricFamily(
            "cardhour_metrics_database_up",
            "1 when the business metrics could be read from the database on this scrape.",
        )
        families: Sequence[Metric] = []
        try:
            families = business_metrics(now=timezone.now())
        except DatabaseError:
            logger.exception("metrics: the business metrics could not be read")
            up.add_metric([], 0.0)
        else:
            up.add_metric([], 1.0)
        yield from families
        yield up
        yield GaugeMetricFamily(
            "cardhour_metrics_collect_duration_seconds",
            "How long reading the business metrics took on this scrape.",
            value=time.perf_counter() - started,
        )


@cache
def metrics_registry() -> CollectorRegistry:
    """The registry /metrics answers: the business metrics and the process's default ones."""
    registry = CollectorRegistry()
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, BusinessCollector()):
        registry.register(collector)
    return registry


def _authorized(request: HttpRequest) -> bool:
    """No METRICS_TOKEN: open (development, tests). Else `Authorization: Bearer <token>`."""
    token: str = settings.METRICS_TOKEN
    if not token:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition (text, or OpenMetrics when asked); 401 without the token."""
    if not _authorized(request):
        response = HttpResponse("Send Authorization: Bearer <METRICS_TOKEN>.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(metrics_registry()), content_type=content_type)
