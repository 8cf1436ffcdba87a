"""GET /metrics: business metrics read from the database at scrape time, in Prometheus format.

Nothing is counted in process memory: each scrape runs a fixed handful of aggregate queries
(pinned by a test), so any gunicorn worker answers with the same numbers and no multi-process
store is needed. The process metrics (CPU, memory, file descriptors, GC) are those of the worker
that answered.

core imports no other app: the SQL names the tables, and status values come from the models
through the app registry at scrape time.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, connection, transaction
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
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

logger = logging.getLogger(__name__)

# A scrape that takes longer is cut off by the database rather than tie up a web worker.
STATEMENT_TIMEOUT_MS = 5000
# "Received lately": the window of the ingestion gauge.
INGEST_WINDOW = timedelta(minutes=5)
# TTFT is read from the hourly rollups of the hours that overlap the last hour.
TTFT_WINDOW = timedelta(hours=1)

POOLS_SQL = """
SELECT o.slug, s.name, m.slug, sum(n.gpu_count), coalesce(sum(busy.gpus), 0)
FROM inventory_node n
JOIN inventory_site s ON s.id = n.site_id
JOIN accounts_organization o ON o.id = s.organization_id
JOIN inventory_gpumodel m ON m.id = n.gpu_model_id
LEFT JOIN (
  SELECT a.node_id, count(DISTINCT a.gpu_id) AS gpus
  FROM leasing_allocation a
  WHERE a.lease_id IS NOT NULL AND a.released_at IS NULL AND a.period @> %(now)s::timestamptz
  GROUP BY a.node_id
) busy ON busy.node_id = n.id
WHERE n.status <> %(retired)s
GROUP BY o.slug, s.name, m.slug
ORDER BY o.slug, s.name, m.slug"""

LEASES_SQL = "SELECT status, count(*) FROM leasing_lease GROUP BY status"

INVOICES_SQL = "SELECT status, count(*) FROM billing_invoice GROUP BY status"

USAGE_SQL = """
SELECT count(*), coalesce(sum(accepted_count), 0), coalesce(sum(duplicate_count), 0),
       coalesce(sum(rejected_count), 0), coalesce(sum(late_count), 0),
       coalesce(sum(event_count) FILTER (WHERE received_at > %(since)s), 0)
FROM billing_usagebatch"""

BILLING_RUNS_SQL = """
SELECT kind, count(*), count(*) FILTER (WHERE failures <> '[]'::jsonb), max(finished_at)
FROM billing_billingrun
GROUP BY kind"""

# Cycle failures name their `stage` (draft, finalize), delivery failures their `step` (pdf,
# email, stripe); both carry the domain error's code.
BILLING_FAILURES_SQL = """
SELECT r.kind, coalesce(f->>'stage', f->>'step', ''), coalesce(f->>'code', ''), count(*)
FROM billing_billingrun r
CROSS JOIN LATERAL jsonb_array_elements(
  CASE WHEN jsonb_typeof(r.failures) = 'array' THEN r.failures ELSE '[]'::jsonb END
) f
WHERE r.failures <> '[]'::jsonb
GROUP BY 1, 2, 3"""

# The worst hourly p95 TTFT among the offering's contracts over the hours that overlap the last
# hour: an hour [h, h + 1 h) overlaps (now - 1 h, now] when h > now - 2 h.
TTFT_SQL = """
SELECT so.id, so.served_model_name, o.slug, so.ttft_p95_ms, max(r.ttft_p95_ms)
FROM leasing_slaoffering so
JOIN accounts_organization o ON o.id = so.provider_id
LEFT JOIN leasing_slasubscription sub ON sub.offering_id = so.id
LEFT JOIN billing_usagerollup r
  ON r.contract_id = sub.contract_id AND r.hour > %(hour_after)s AND r.hour <= %(now)s
GROUP BY so.id, so.served_model_name, o.slug, so.ttft_p95_ms
ORDER BY so.id"""

CAPACITY_SQL = """
SELECT o.slug, s.name, m.slug, c.level, c.raised, c.utilization, c.evaluated_on
FROM billing_capacitysignal c
JOIN accounts_organization o ON o.id = c.provider_id
JOIN inventory_site s ON s.id = c.site_id
JOIN inventory_gpumodel m ON m.id = c.gpu_model_id
WHERE c.evaluated_on = (SELECT max(evaluated_on) FROM billing_capacitysignal)
ORDER BY o.slug, s.name, m.slug"""

POOL_LABELS = ["provider", "site", "gpu_model"]
OFFERING_LABELS = ["offering", "served_model", "provider"]


def _status_values(model: str) -> list[str]:
    """Every status value of a model, so that a status with no rows still answers 0."""
    field = apps.get_model(model)._meta.get_field("status")
    return [str(value) for value, _ in field.choices or []]


def _rows(sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or {})
        return cursor.fetchall()


def _seconds(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


def _pool_metrics(now: datetime) -> list[Metric]:
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
    for provider, site, gpu_model, total, busy in _rows(
        POOLS_SQL, {"now": now, "retired": "retired"}
    ):
        labels = [provider, site, gpu_model]
        gpus.add_metric(labels, float(total))
        allocated.add_metric(labels, float(busy))
        utilization.add_metric(labels, float(busy) / float(total) if total else 0.0)
    return [gpus, allocated, utilization]


def _by_status(name: str, documentation: str, model: str, sql: str) -> Metric:
    counts = {str(status): count for status, count in _rows(sql)}
    family = GaugeMetricFamily(name, documentation, labels=["status"])
    for status in sorted({*_status_values(model), *counts}):
        family.add_metric([status], float(counts.get(status, 0)))
    return family


def _usage_metrics(now: datetime) -> list[Metric]:
    [(batches, accepted, duplicate, rejected, late, recent)] = _rows(
        USAGE_SQL, {"since": now - INGEST_WINDOW}
    )
    batches_total = CounterMetricFamily(
        "cardhour_usage_batches", "Usage batches received.", value=float(batches)
    )
    events = CounterMetricFamily(
        "cardhour_usage_events",
        "Usage events received, by what became of them.",
        labels=["outcome"],
    )
    events.add_metric(["accepted"], float(accepted))
    events.add_metric(["duplicate"], float(duplicate))
    events.add_metric(["rejected"], float(rejected))
    late_total = CounterMetricFamily(
        "cardhour_usage_events_late",
        "Accepted usage events whose billing period had closed (billed on a later invoice).",
        value=float(late),
    )
    received = GaugeMetricFamily(
        "cardhour_usage_events_received_last_5m",
        "Usage events received in the last 5 minutes (all outcomes).",
        value=float(recent),
    )
    return [batches_total, events, late_total, received]


def _billing_run_metrics() -> list[Metric]:
    runs = CounterMetricFamily("cardhour_billing_runs", "Billing runs, by kind.", labels=["kind"])
    failed = CounterMetricFamily(
        "cardhour_billing_runs_failed",
        "Billing runs that recorded at least one failure, by kind.",
        labels=["kind"],
    )
    last = GaugeMetricFamily(
        "cardhour_billing_run_last_finished_timestamp_seconds",
        "When the last billing run of the kind finished (0: never).",
        labels=["kind"],
    )
    for kind, count, failed_count, finished_at in _rows(BILLING_RUNS_SQL):
        runs.add_metric([kind], float(count))
        failed.add_metric([kind], float(failed_count))
        last.add_metric([kind], _seconds(finished_at))
    failures = CounterMetricFamily(
        "cardhour_billing_run_failures",
        "Failures recorded by billing runs, by kind, stage (draft, finalize, pdf, email, stripe)"
        " and error code.",
        labels=["kind", "stage", "code"],
    )
    stripe = CounterMetricFamily(
        "cardhour_stripe_push_failures",
        "Invoice deliveries that failed at the Stripe push, by error code.",
        labels=["code"],
    )
    for kind, stage, code, count in _rows(BILLING_FAILURES_SQL):
        failures.add_metric([kind, stage, code], float(count))
        if kind == "delivery" and stage == "stripe":
            stripe.add_metric([code], float(count))
    return [runs, failed, last, failures, stripe]


def _ttft_metrics(now: datetime) -> list[Metric]:
    observed = GaugeMetricFamily(
        "cardhour_sla_ttft_p95_seconds",
        "Worst hourly p95 time to first token among the offering's contracts, over the rollup"
        " hours that overlap the last hour (absent without traffic).",
        labels=OFFERING_LABELS,
    )
    target = GaugeMetricFamily(
        "cardhour_sla_ttft_p95_target_seconds",
        "The p95 time-to-first-token the SLA offering promises.",
        labels=OFFERING_LABELS,
    )
    params = {"hour_after": now - 2 * TTFT_WINDOW, "now": now}
    for offering_id, served_model, provider, target_ms, worst_ms in _rows(TTFT_SQL, params):
        labels = [str(offering_id), served_model, provider]
        target.add_metric(labels, float(target_ms) / 1000)
        if worst_ms is not None:
            observed.add_metric(labels, float(worst_ms) / 1000)
    return [observed, target]


def _capacity_metrics() -> list[Metric]:
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
    evaluated_on = None
    for provider, site, gpu_model, level, is_raised, ratio, day in _rows(CAPACITY_SQL):
        raised.add_metric([provider, site, gpu_model, level], 1.0 if is_raised else 0.0)
        if ratio is not None:
            utilization.add_metric([provider, site, gpu_model], float(ratio))
        evaluated_on = day
    day_start = (
        datetime.combine(evaluated_on, datetime.min.time(), tzinfo=UTC) if evaluated_on else None
    )
    evaluated.add_metric([], _seconds(day_start))
    return [raised, utilization, evaluated]


def business_metrics(*, now: datetime) -> list[Metric]:
    """Every business metric as of `now`: eight aggregate queries in one short transaction."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, true)", [str(STATEMENT_TIMEOUT_MS)]
            )
        return [
            *_pool_metrics(now),
            _by_status("cardhour_leases", "Leases, by status.", "leasing.Lease", LEASES_SQL),
            *_usage_metrics(now),
            _by_status(
                "cardhour_invoices", "Invoices, by status.", "billing.Invoice", INVOICES_SQL
            ),
            *_billing_run_metrics(),
            *_ttft_metrics(now),
            *_capacity_metrics(),
        ]


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
