"""Billing's business metrics for /metrics: usage ingestion, invoices, payouts, billing runs, SLA
latency, and the ledger's mismatches with the documents (read from the latest `ledger` billing
run, which `manage.py ledger_reconcile` and the nightly `billing.reconcile_ledger` task write)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Count, F, Func, IntegerField, Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from billing.models import (
    BillingRun,
    BillingRunKind,
    BillingRunOutcome,
    Invoice,
    Payout,
    UsageBatch,
)
from core.metrics import status_gauge, timestamp_seconds
from leasing.models import SlaOffering

# "Received lately": the window of the ingestion gauge.
INGEST_WINDOW = timedelta(minutes=5)
# TTFT is read from the hourly rollups of the hours that overlap the last hour.
TTFT_WINDOW = timedelta(hours=1)
OFFERING_LABELS = ["offering", "served_model", "provider"]

# Cycle failures name their `stage` (draft, finalize), delivery failures their `step` (pdf,
# email, stripe); both carry the domain error's code. The failures are a JSON array per run.
FAILURES_SQL = f"""
SELECT r.kind, coalesce(f->>'stage', f->>'step', ''), coalesce(f->>'code', ''), count(*)
FROM {BillingRun._meta.db_table} r
CROSS JOIN LATERAL jsonb_array_elements(
  CASE WHEN jsonb_typeof(r.failures) = 'array' THEN r.failures ELSE '[]'::jsonb END
) f
WHERE r.failures <> '[]'::jsonb
GROUP BY 1, 2, 3"""


def _usage_metrics(now: datetime) -> list[Metric]:
    totals = UsageBatch.objects.order_by().aggregate(
        batches=Count("pk"),
        accepted=Coalesce(Sum("accepted_count"), 0),
        duplicate=Coalesce(Sum("duplicate_count"), 0),
        rejected=Coalesce(Sum("rejected_count"), 0),
        late=Coalesce(Sum("late_count"), 0),
        recent=Coalesce(Sum("event_count", filter=Q(received_at__gt=now - INGEST_WINDOW)), 0),
    )
    events = CounterMetricFamily(
        "cardhour_usage_events",
        "Usage events received, by what became of them.",
        labels=["outcome"],
    )
    for outcome in ("accepted", "duplicate", "rejected"):
        events.add_metric([outcome], float(totals[outcome]))
    return [
        CounterMetricFamily(
            "cardhour_usage_batches", "Usage batches received.", value=float(totals["batches"])
        ),
        events,
        CounterMetricFamily(
            "cardhour_usage_events_late",
            "Accepted usage events whose billing period had closed (billed on a later invoice).",
            value=float(totals["late"]),
        ),
        GaugeMetricFamily(
            "cardhour_usage_events_received_last_5m",
            "Usage events received in the last 5 minutes (all outcomes).",
            value=float(totals["recent"]),
        ),
    ]


def _billing_run_metrics() -> list[Metric]:
    runs = CounterMetricFamily("cardhour_billing_runs", "Billing runs, by kind.", labels=["kind"])
    failed = CounterMetricFamily(
        "cardhour_billing_runs_failed",
        "Billing runs that recorded at least one failure or were abandoned, by kind.",
        labels=["kind"],
    )
    abandoned = CounterMetricFamily(
        "cardhour_billing_runs_abandoned",
        "Billing runs left open past BILLING_RUN_TIMEOUT_MINUTES (their worker was killed),"
        " marked abandoned, by kind.",
        labels=["kind"],
    )
    running = GaugeMetricFamily(
        "cardhour_billing_runs_running",
        "Billing runs open now (not completed, not yet marked abandoned), by kind.",
        labels=["kind"],
    )
    last = GaugeMetricFamily(
        "cardhour_billing_run_last_finished_timestamp_seconds",
        "When the last billing run of the kind completed (0: never; abandoned runs do not count).",
        labels=["kind"],
    )
    latest_failures = GaugeMetricFamily(
        "cardhour_billing_run_last_failures",
        "Failures recorded by the latest run of the kind (for `reconciliation`: usage that does"
        " not match its invoices, or belongs to no period or to two).",
        labels=["kind"],
    )
    latest_run_failures = Subquery(
        BillingRun.objects.filter(kind=OuterRef("kind"))
        .order_by("-started_at", "-pk")
        .annotate(
            count=Func(F("failures"), function="jsonb_array_length", output_field=IntegerField())
        )
        .values("count")[:1]
    )
    by_kind = (
        BillingRun.objects.order_by("kind")
        .values_list("kind")
        .annotate(
            runs=Count("pk"),
            failed=Count("pk", filter=~Q(failures=[]) | Q(outcome=BillingRunOutcome.ABANDONED)),
            abandoned=Count("pk", filter=Q(outcome=BillingRunOutcome.ABANDONED)),
            running=Count("pk", filter=Q(outcome=BillingRunOutcome.RUNNING)),
            last=Max("finished_at", filter=Q(outcome=BillingRunOutcome.COMPLETED)),
            latest=latest_run_failures,
        )
    )
    ledger_mismatches = 0
    for kind, count, failed_count, abandoned_count, running_count, finished_at, latest in by_kind:
        if kind == BillingRunKind.LEDGER:
            ledger_mismatches = latest or 0
        runs.add_metric([kind], float(count))
        failed.add_metric([kind], float(failed_count))
        abandoned.add_metric([kind], float(abandoned_count))
        running.add_metric([kind], float(running_count))
        last.add_metric([kind], timestamp_seconds(finished_at))
        latest_failures.add_metric([kind], float(latest or 0))
    failures = CounterMetricFamily(
        "cardhour_billing_run_failures",
        "Failures recorded by billing runs, by kind, stage (draft, finalize, pdf, email, stripe,"
        " reconcile) and error code.",
        labels=["kind", "stage", "code"],
    )
    stripe = CounterMetricFamily(
        "cardhour_stripe_push_failures",
        "Invoice deliveries that failed at the Stripe push, by error code.",
        labels=["code"],
    )
    with connection.cursor() as cursor:
        cursor.execute(FAILURES_SQL)
        rows = cursor.fetchall()
    for kind, stage, code, count in rows:
        failures.add_metric([kind, stage, code], float(count))
        if kind == "delivery" and stage == "stripe":
            stripe.add_metric([code], float(count))
    ledger = GaugeMetricFamily(
        "cardhour_ledger_mismatches",
        "Differences between the ledger and the documents found by the latest ledger"
        " reconciliation (0: they agree, or it never ran; see the _failures_total by code).",
        value=float(ledger_mismatches),
    )
    return [runs, failed, abandoned, running, last, latest_failures, failures, stripe, ledger]


def _ttft_metrics(now: datetime) -> list[Metric]:
    """The worst hourly p95 TTFT of each offering's contracts over the hours overlapping the last.

    An hour [h, h + 1 h) overlaps (now - 1 h, now] when h > now - 2 h.
    """
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
    rollups = "subscriptions__contract__usage_rollups"
    offerings = (
        SlaOffering.objects.order_by("pk")
        .annotate(
            worst=Max(
                f"{rollups}__ttft_p95_ms",
                filter=Q(
                    **{
                        f"{rollups}__hour__gt": now - 2 * TTFT_WINDOW,
                        f"{rollups}__hour__lte": now,
                    }
                ),
            )
        )
        .values_list("pk", "served_model_name", "provider__slug", "ttft_p95_ms", "worst")
    )
    for offering_id, served_model, provider, target_ms, worst_ms in offerings:
        labels = [str(offering_id), served_model, provider]
        target.add_metric(labels, float(target_ms) / 1000)
        if worst_ms is not None:
            observed.add_metric(labels, float(worst_ms) / 1000)
    return [observed, target]


def business_metrics(now: datetime) -> list[Metric]:
    """Every billing metric as of `now` (six aggregate queries)."""
    return [
        *_usage_metrics(now),
        status_gauge("cardhour_invoices", "Invoices, by status.", Invoice),
        status_gauge("cardhour_payouts", "Provider payouts, by status.", Payout),
        *_billing_run_metrics(),
        *_ttft_metrics(now),
    ]
