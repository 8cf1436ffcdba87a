"""GET /metrics: the business metrics read from the database, in Prometheus text format."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from billing.models import BillingRun, BillingRunKind, UsageBatch
from billing.services.delivery import invoice_deliver
from billing.services.rollups import usage_rollups_refresh_batch
from billing.services.runs import billing_run_open, run_timeout
from billing.services.stripe import StripeUnavailable
from billing.tasks import run_cycle
from economics.services.signals import capacity_signals_evaluate
from leasing.models import Lease
from leasing.services.offers import sla_subscription_create
from tests.billing.factories import event, token_contract
from tests.billing.invoice_factories import make_issued_invoice
from tests.inventory.factories import make_node
from tests.leasing.factories import make_sla_offering
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

POOL = {"provider": "southern-cross", "site": "southern-cross site", "gpu_model": "h200-sxm"}
# A savepoint (the test's transaction), the statement timeout, nine aggregates, the release.
SCRAPE_QUERIES = 12


def scrape(client: Client, **headers: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a successful scrape, by (sample name, labels)."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture
def marketplace(client_for, provider, customer):
    """A pool of 8 GPUs (and a retired node) with 4 leased from now, and a quote that found none."""
    offer, nodes = make_pool(provider)
    make_node(nodes[0].site, hostname="h200-sxm-retired", status="retired")
    client = client_for(customer)
    lease = client.post(
        "/api/v1/leases/",
        {"offer": offer.pk, "gpu_count": 4, "start": timezone.now().isoformat(), "hours": 24},
        format="json",
    )
    assert lease.status_code == 201, lease.json()
    quote = client.post(
        "/api/v1/quotes/",
        {"gpu_model": "h200-sxm", "gpu_count": 64, "start": next_hour().isoformat(), "hours": 24},
        format="json",
    )
    assert quote.status_code == 409, quote.json()
    return offer


@pytest.fixture
def token_traffic(client_for, provider, customer):
    """An SLA offering with one subscribed contract and a batch: 2 accepted, 1 duplicate, 1
    rejected, rolled up (TTFT 100 and 300 ms: p95 290 ms)."""
    now = timezone.now()
    offering = make_sla_offering(provider, ttft_p95_ms=400)
    contract = token_contract(
        provider, customer, term_start=now - timedelta(days=30), term_end=now + timedelta(days=300)
    )
    sla_subscription_create(offering=offering, contract=contract)
    at = now - timedelta(minutes=10)
    response = client_for(provider).post(
        "/api/v1/usage/events/",
        {
            "events": [
                event("fast", contract, at, ttft_ms=100.0),
                event("slow", contract, at, ttft_ms=300.0),
                event("exploded", contract, at, status="exploded"),
                event("fast", contract, at, ttft_ms=100.0),
            ]
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    usage_rollups_refresh_batch(batch_id=UsageBatch.objects.get().pk)
    return offering


@pytest.fixture
def failed_stripe_push(provider, customer, settings, marketplace):
    """An issued invoice of the marketplace's lease whose delivery failed at Stripe (nothing
    listens on the API base)."""
    customer.billing_emails = ["ap@acme.example"]
    customer.save(update_fields=["billing_emails"])
    lease = Lease.objects.get(offer=marketplace)
    invoice = make_issued_invoice(provider, customer, contract=lease.contract)
    settings.STRIPE_API_KEY = "sk_test_metrics"
    settings.STRIPE_API_BASE = "http://127.0.0.1:9"
    with pytest.raises(StripeUnavailable):
        invoice_deliver(invoice_id=invoice.pk)
    return invoice


def test_an_empty_marketplace_scrapes_with_zeros_and_process_metrics(client):
    samples = scrape(client)
    assert value(samples, "cardhour_metrics_database_up") == 1
    assert value(samples, "cardhour_leases", status="active") == 0
    assert value(samples, "cardhour_invoices", status="paid") == 0
    assert value(samples, "cardhour_usage_events_total", outcome="accepted") == 0
    assert value(samples, "cardhour_capacity_signals_evaluated_timestamp_seconds") == 0
    names = {name for name, _ in samples}
    assert "process_resident_memory_bytes" in names
    assert "python_info" in names


def test_the_scrape_carries_the_business_metrics_of_the_data(
    client, marketplace, token_traffic, failed_stripe_push
):
    capacity_signals_evaluate(now=timezone.now() + timedelta(seconds=1))
    samples = scrape(client)

    assert value(samples, "cardhour_pool_gpus", **POOL) == 8  # the retired node is left out
    assert value(samples, "cardhour_pool_gpus_allocated", **POOL) == 4
    assert value(samples, "cardhour_pool_utilization_ratio", **POOL) == 0.5
    assert value(samples, "cardhour_leases", status="active") == 1
    assert value(samples, "cardhour_leases", status="ended") == 0

    assert value(samples, "cardhour_usage_batches_total") == 1
    assert value(samples, "cardhour_usage_events_total", outcome="accepted") == 2
    assert value(samples, "cardhour_usage_events_total", outcome="duplicate") == 1
    assert value(samples, "cardhour_usage_events_total", outcome="rejected") == 1
    assert value(samples, "cardhour_usage_events_late_total") == 0
    assert value(samples, "cardhour_usage_events_received_last_5m") == 4

    offering = {
        "offering": str(token_traffic.pk),
        "served_model": token_traffic.served_model_name,
        "provider": "southern-cross",
    }
    assert value(samples, "cardhour_sla_ttft_p95_seconds", **offering) == pytest.approx(0.29)
    assert value(samples, "cardhour_sla_ttft_p95_target_seconds", **offering) == 0.4

    assert value(samples, "cardhour_invoices", status="sent") == 1  # e-mailed before Stripe
    assert value(samples, "cardhour_invoices", status="finalized") == 0
    assert value(samples, "cardhour_invoices", status="draft") == 0
    assert value(samples, "cardhour_billing_runs_total", kind="delivery") == 1
    assert value(samples, "cardhour_billing_runs_failed_total", kind="delivery") == 1
    assert (
        value(
            samples,
            "cardhour_billing_run_failures_total",
            kind="delivery",
            stage="stripe",
            code="stripe_unavailable",
        )
        == 1
    )
    assert value(samples, "cardhour_stripe_push_failures_total", code="stripe_unavailable") == 1
    finished = BillingRun.objects.get().finished_at
    assert value(
        samples, "cardhour_billing_run_last_finished_timestamp_seconds", kind="delivery"
    ) == pytest.approx(finished.timestamp())

    # The refused quote for H200s makes the H200 pool's unmet demand grow: a raised signal.
    assert value(samples, "cardhour_capacity_signal_raised", **POOL, level="ok") == 1
    assert value(samples, "cardhour_capacity_signals_evaluated_timestamp_seconds") > 0


def test_runs_a_killed_worker_left_open_count_as_running_then_as_abandoned_and_failed(client):
    """A cycle run whose worker died: open until the timeout, then abandoned by the next run."""
    started = timezone.now() - run_timeout() - timedelta(minutes=5)
    with time_machine.travel(started, tick=False):
        killed, _ = billing_run_open(kind=BillingRunKind.CYCLE, as_of=started)
    completed = BillingRun.objects.get(pk=run_cycle())
    samples = scrape(client)
    assert value(samples, "cardhour_billing_runs_total", kind="cycle") == 2
    assert value(samples, "cardhour_billing_runs_running", kind="cycle") == 0
    assert value(samples, "cardhour_billing_runs_abandoned_total", kind="cycle") == 1
    assert value(samples, "cardhour_billing_runs_failed_total", kind="cycle") == 1
    killed.refresh_from_db()
    assert killed.picked_up_by == completed
    # The last finished run is the one that completed, not the abandoned one's marking.
    assert value(
        samples, "cardhour_billing_run_last_finished_timestamp_seconds", kind="cycle"
    ) == pytest.approx(completed.finished_at.timestamp())

    billing_run_open(kind=BillingRunKind.CYCLE, as_of=timezone.now())
    samples = scrape(client)
    assert value(samples, "cardhour_billing_runs_running", kind="cycle") == 1
    assert value(samples, "cardhour_billing_runs_abandoned_total", kind="cycle") == 1


def test_a_scrape_runs_a_fixed_handful_of_queries_whatever_the_data(
    client, client_for, provider, customer, marketplace, token_traffic
):
    with CaptureQueriesContext(connection) as before:
        scrape(client)
    assert len(before.captured_queries) == SCRAPE_QUERIES, [
        query["sql"] for query in before.captured_queries
    ]
    more, _ = make_pool(provider, gpu_model="b200", site=marketplace.site)
    lease = client_for(customer).post(
        "/api/v1/leases/",
        {"offer": more.pk, "gpu_count": 2, "start": timezone.now().isoformat(), "hours": 24},
        format="json",
    )
    assert lease.status_code == 201, lease.json()
    make_sla_offering(provider)
    with CaptureQueriesContext(connection) as after:
        samples = scrape(client)
    assert len(after.captured_queries) == SCRAPE_QUERIES
    assert value(samples, "cardhour_leases", status="active") == 2


def test_with_a_metrics_token_the_scrape_needs_it_as_a_bearer_token(client, settings):
    settings.METRICS_TOKEN = "scrape-token-1234567890"
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong-token").status_code == 401
    assert (
        client.get("/metrics", HTTP_AUTHORIZATION="Api-Key scrape-token-1234567890").status_code
        == 401
    )
    samples = scrape(client, HTTP_AUTHORIZATION="Bearer scrape-token-1234567890")
    assert value(samples, "cardhour_metrics_database_up") == 1


def test_without_a_metrics_token_the_scrape_is_open(client, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 200


def test_metrics_answer_only_get(client):
    assert client.post("/metrics").status_code == 405


def test_a_scraper_that_asks_for_openmetrics_gets_it(client):
    response = client.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().rstrip().endswith("# EOF")
