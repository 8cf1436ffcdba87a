"""The broker restarts: queued tasks survive it, a running task is not lost, nothing bills twice.

The broker is a private redis-server with the append-only file fsynced on every write, stopped
with SIGTERM (as a service manager does) and started again on the same port and data.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import requests
from django.utils import timezone

from accounts.choices import KeyScope
from accounts.models import Organization
from accounts.services import api_key_create
from billing.models import (
    BillingRun,
    BillingRunKind,
    DocumentSequence,
    NumberSeries,
    UsageEvent,
)
from tests.billing.factories import events, token_contract
from tests.faults.billing_data import (
    AS_OF,
    INVOICES_PER_PROVIDER,
    Scenario,
    at,
    emails_per_invoice,
    scenario,
    stripe_invoices_by_ours,
    wait_delivered,
)
from tests.faults.conftest import StartWorker
from tests.faults.tools import (
    ApiServer,
    HeldStripe,
    RedisServer,
    StalledInserts,
    send_task,
    service_env,
    wait_for,
)

TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)
# Billable hours per GPU of each month: January from the acceptance on the 11th at 12:00.
HOURS_PER_GPU = {1: 20 * 24 + 12, 2: 28 * 24}


def assert_billed_once(subject: Scenario, stripe: HeldStripe, mail: Path) -> None:
    """One invoice per lease and month at GPUs x hours x rate, numbers 1..4 without a gap,
    one e-mail and one sent Stripe invoice each."""
    invoices = subject.invoices()
    expected = {
        (lease.contract_id, month): lease.gpu_count * hours * Decimal(rate)
        for lease, rate in zip(subject.leases, ("2.40", "3.10"), strict=True)
        for month, hours in HOURS_PER_GPU.items()
    }
    assert {(i.contract_id, i.period_start.month): i.total for i in invoices} == expected
    assert len(invoices) == INVOICES_PER_PROVIDER
    assert sorted(i.sequence_number or 0 for i in invoices) == list(range(1, len(invoices) + 1))
    sequence = DocumentSequence.objects.get(
        issuer=subject.provider, series=NumberSeries.INVOICE, year=AS_OF.year
    )
    assert sequence.last_number == INVOICES_PER_PROVIDER
    assert emails_per_invoice(mail, subject) == [1] * INVOICES_PER_PROVIDER
    on_stripe = stripe_invoices_by_ours(stripe)
    assert sorted(on_stripe) == sorted(str(i.pk) for i in invoices)
    for invoice in invoices:
        (remote,) = on_stripe[str(invoice.pk)]
        assert (remote["id"], remote["status"]) == (invoice.stripe_invoice_id, "open")
        assert remote["total"] == int(invoice.total * 100)


@TRANSACTIONAL
@pytest.mark.worker
def test_tasks_queued_when_the_broker_restarts_each_run_once_after_it(
    private_redis: RedisServer, held_stripe: HeldStripe, start_worker: StartWorker, tmp_path: Path
) -> None:
    subject = scenario("queued")
    # Ticks of beat queued with no worker up: the first after January's grace ended, the first
    # after February's, and that one again (as a beat restarted in the same hour sends it).
    ticks = [at(2, 1, 2), at(3, 1, 2), at(3, 1, 2)]
    for tick in ticks:
        send_task(private_redis.url, "billing.run_cycle", tick.isoformat())
    assert private_redis.queue_length("billing") == len(ticks)

    private_redis.restart()
    assert private_redis.queue_length("billing") == len(ticks)  # on disk, fsynced per write
    start_worker()
    wait_delivered(subject)
    wait_for(
        lambda: private_redis.queue_length("billing") == private_redis.unacked() == 0,
        seconds=60,
        what="the worker to run every queued task",
    )

    assert_billed_once(subject, held_stripe, tmp_path / "mail")
    # Each tick ran once, in order: each month's run drafted and issued that month's two
    # invoices; the repeated tick found nothing left to do.
    runs = BillingRun.objects.filter(kind=BillingRunKind.CYCLE).order_by("pk")
    assert [(run.as_of, run.drafts_created, run.finalized) for run in runs] == [
        (ticks[0], 2, 2),
        (ticks[1], 2, 2),
        (ticks[2], 0, 0),
    ]


@TRANSACTIONAL
@pytest.mark.worker
def test_a_cycle_running_while_the_broker_restarts_finishes_and_bills_once(
    private_redis: RedisServer, held_stripe: HeldStripe, start_worker: StartWorker, tmp_path: Path
) -> None:
    subject = scenario("restart")
    worker = start_worker()
    # The run stops in the second lease's February draft, the last of four, while the broker
    # is stopped and started again under it.
    with StalledInserts("billing_invoiceline", subject.line_insert_of(lease=1, month=2)) as stall:
        send_task(private_redis.url, "billing.run_cycle", AS_OF.isoformat())
        stall.wait_stalled()
        private_redis.restart()
        stall.release()
        wait_delivered(subject)

    assert worker.process.poll() is None
    assert_billed_once(subject, held_stripe, tmp_path / "mail")
    # A rerun of the message whose acknowledgement was lost with the connection finds nothing.
    runs = list(BillingRun.objects.filter(kind=BillingRunKind.CYCLE).order_by("pk"))
    assert (runs[0].as_of, runs[0].drafts_created, runs[0].finalized) == (AS_OF, 4, 4)
    assert [(run.drafts_created, run.finalized) for run in runs[1:]] in ([], [(0, 0)])


@TRANSACTIONAL
@pytest.mark.worker
def test_invoices_finalized_while_the_broker_is_down_are_delivered_after_the_next_tick(
    private_redis: RedisServer, held_stripe: HeldStripe, start_worker: StartWorker, tmp_path: Path
) -> None:
    subject = scenario("down")
    worker = start_worker()
    with StalledInserts("billing_invoiceline", subject.line_insert_of(lease=1, month=2)) as stall:
        send_task(private_redis.url, "billing.run_cycle", AS_OF.isoformat())
        stall.wait_stalled()
        private_redis.stop()
        # The run goes on with the broker down: it drafts and finalizes every invoice, but
        # cannot hand any of them to delivery.
        stall.release()
        cycle = BillingRun.objects.filter(kind=BillingRunKind.CYCLE, finished_at__isnull=False)
        wait_for(cycle.exists, seconds=60, what="the run to finish with the broker down")
    assert [(run.drafts_created, run.finalized) for run in cycle] == [(4, 4)]
    assert not BillingRun.objects.filter(kind=BillingRunKind.DELIVERY).exists()
    private_redis.start()

    # Beat's next tick, an hour later, hands the never-delivered invoices over again.
    next_tick = AS_OF + timedelta(hours=1)
    send_task(private_redis.url, "billing.run_cycle", next_tick.isoformat())
    wait_delivered(subject)

    assert worker.process.poll() is None
    assert_billed_once(subject, held_stripe, tmp_path / "mail")
    again = BillingRun.objects.get(kind=BillingRunKind.CYCLE, as_of=next_tick)
    assert sorted(again.summary["handed_over_again"]) == sorted(i.pk for i in subject.invoices())


@TRANSACTIONAL
def test_a_usage_batch_posted_while_the_broker_is_down_is_stored_and_answered(
    private_redis: RedisServer, provider: Organization, customer: Organization, tmp_path: Path
) -> None:
    # A committed batch asks the broker for a rollup refresh; with the broker down that
    # request fails after the commit, and the periodic sweep catches up later.
    now = timezone.now()
    contract = token_contract(
        provider, customer, term_start=now - timedelta(days=30), term_end=now + timedelta(days=365)
    )
    batch = {"events": events(contract, now - timedelta(hours=1), 10)}
    key = api_key_create(organization=provider, name="faults", scope=KeyScope.WRITE)
    private_redis.stop()
    env = service_env(broker_url=private_redis.url, tmp_path=tmp_path, stripe_url=None)
    server = ApiServer(env, tmp_path / "gunicorn.log")
    try:
        session = requests.Session()
        session.headers["Authorization"] = f"Api-Key {key.raw_key}"
        url = f"{server.url}/api/v1/usage/events/"
        headers = {"Idempotency-Key": "broker-down-1"}
        answer = session.post(url, json=batch, headers=headers, timeout=60)
        replayed = session.post(url, json=batch, headers=headers, timeout=60)
    finally:
        server.stop()

    assert answer.status_code == 201, answer.text
    assert answer.json()["accepted"] == 10
    # Promptly: the request does not wait out the result backend's reconnection attempts.
    assert answer.elapsed < timedelta(seconds=10), answer.elapsed
    assert (replayed.status_code, replayed.headers.get("Idempotent-Replayed")) == (201, "true")
    assert UsageEvent.objects.filter(source_id=provider.pk).count() == 10
