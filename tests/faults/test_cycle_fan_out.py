"""The billing cycle fanned out over Celery workers bills the same with one worker or four.

Real `celery worker` processes on a real (private) Redis broker: beat's `billing.run_cycle` plans
batches of two contracts (BILLING_CYCLE_BATCH_SIZE), sends them as a group of chains
(`billing.cycle_batch`), and the batch that finishes last closes the run. Two marketplaces of the
same shape — three providers, four customers, one of them with a prepaid grant that two
providers' invoices draw on — are billed as of the same instant, the first by one worker, the
second by four: same invoices, numbers, lines and totals, and the same run totals.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import time_machine

from accounts.models import Organization
from billing.models import BillingRun, BillingRunKind, BillingRunOutcome, GrantKind, Invoice
from billing.services.grants import credit_grant_create
from tests.factories import OrganizationFactory, ProviderFactory
from tests.faults.tools import RedisServer, Worker, send_task, service_env, wait_for
from tests.scenarios import lease_h200

TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)
# January and February have ended, with their grace hour: two invoices per contract.
AS_OF = datetime(2026, 3, 1, 2, tzinfo=UTC)
# (provider, customer, GPUs, rate): three providers, four customers; customer 0 holds a grant.
LEASES = [
    (0, 0, 2, "2.40"),
    (0, 1, 1, "2.50"),
    (0, 2, 4, "2.10"),
    (1, 0, 2, "3.10"),
    (1, 3, 1, "2.90"),
    (2, 1, 2, "2.20"),
    (2, 2, 1, "2.60"),
    (2, 3, 3, "2.30"),
]


def marketplace(name: str) -> tuple[list[Organization], list[Organization]]:
    """Providers and customers of one marketplace, its leases and the grant of customer 0."""
    providers = [ProviderFactory(name=f"{name} P{i}", slug=f"{name}-p{i}") for i in range(3)]
    customers = [OrganizationFactory(name=f"{name} C{i}", slug=f"{name}-c{i}") for i in range(4)]
    for provider, customer, gpus, rate in LEASES:
        lease_h200(providers[provider], customers[customer], gpus=gpus, rate=rate)
    with time_machine.travel(datetime(2026, 1, 5, tzinfo=UTC), tick=False):
        credit_grant_create(
            customer=customers[0],
            currency="USD",
            amount=Decimal("500.00"),
            kind=GrantKind.PROMOTIONAL,
            reason="launch credit",
            vouched_by="operator ops@cardhour",
            actor="ops@cardhour",
        )
    return providers, customers


def billed(providers: list[Organization], customers: list[Organization]) -> list[Any]:
    """Every invoice as (provider, customer, period, number, status, total, lines), by position."""
    index = {org.pk: position for position, org in enumerate(providers)}
    index |= {org.pk: position for position, org in enumerate(customers)}
    return sorted(
        (
            index[invoice.issuer_id],
            index[invoice.customer_id],
            invoice.period_start,
            invoice.sequence_number,
            invoice.status,
            invoice.subtotal,
            invoice.total,
            list(invoice.lines.order_by("position").values_list("kind", "quantity", "amount")),
        )
        for invoice in Invoice.objects.filter(issuer__in=providers)
    )


def run_with_workers(count: int, broker: RedisServer, tmp_path: Path) -> BillingRun:
    """Start `count` workers, send beat's cycle as of AS_OF, wait for its run to close."""
    env = service_env(broker_url=broker.url, tmp_path=tmp_path, stripe_url=None)
    env.update(
        BILLING_CYCLE_BATCH_SIZE="2",
        # No redelivery of a running batch and no run abandoned while its batches still run.
        CELERY_VISIBILITY_TIMEOUT_SECONDS="3600",
        FAULTS_BROKER_TRANSPORT_OPTIONS='{"visibility_timeout": 3600}',
        BILLING_RUN_TIMEOUT_MINUTES="30",
    )
    before = set(BillingRun.objects.values_list("pk", flat=True))
    workers = [Worker(env, tmp_path / f"worker-{count}-{n}.log") for n in range(count)]
    try:
        for worker in workers:
            worker.wait_ready(seconds=240)
        send_task(broker.url, "billing.run_cycle", AS_OF.isoformat())
        run = wait_for(
            lambda: (
                BillingRun.objects.filter(
                    kind=BillingRunKind.CYCLE, outcome=BillingRunOutcome.COMPLETED
                )
                .exclude(pk__in=before)
                .first()
            ),
            seconds=300,
            what=f"the cycle run on {count} workers to close",
        )
        # Every batch ran on some worker; with four, more than one worker took batches.
        busy = [w for w in workers if "billing.cycle_batch" in w.output()]
        assert busy, [w.output()[-2000:] for w in workers]
        return run
    finally:
        for worker in workers:
            worker.kill()


def run_figures(run: BillingRun) -> tuple[Any, ...]:
    return (
        run.drafts_created,
        run.finalized,
        run.failures,
        run.summary["batches"],
        len(run.summary["batches_done"]),
    )


@TRANSACTIONAL
@pytest.mark.worker
def test_the_cycle_bills_the_same_invoices_numbers_and_totals_on_one_worker_or_four(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    alone = marketplace("one")
    single = run_with_workers(1, private_redis, tmp_path / "one")
    together = marketplace("four")
    quadruple = run_with_workers(4, private_redis, tmp_path / "four")

    invoices = billed(*alone)
    assert len(invoices) == 2 * len(LEASES)
    assert invoices == billed(*together)
    # Numbers 1..n per provider, in the same order on both.
    for provider in range(3):
        numbers = sorted(row[3] for row in invoices if row[0] == provider)
        assert numbers == list(range(1, len(numbers) + 1))
    # The grant was drawn: the same amount from the same invoices on both.
    assert any(kind == "balance_draw" for row in invoices for kind, _, _ in row[7])
    assert run_figures(single) == run_figures(quadruple)
    assert run_figures(single)[:3] == (2 * len(LEASES), 2 * len(LEASES), [])
    assert run_figures(single)[3] > 2
