"""The billing cycle: one invoice per contract and period, gapless numbers, whatever happens.

Two card-hour leases of one provider are billed for January to April 2026: two runs at once, a
worker killed inside finalization, reruns, a void and reissue, and credit notes must all leave
exactly one live invoice per period and invoice numbers 1..n without a gap.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
import time_machine
from celery import Celery
from django.conf import settings
from django.db import connection, connections

from accounts.models import Organization
from billing.models import (
    BillingRun,
    CreditNote,
    DocumentSequence,
    Invoice,
    InvoiceLine,
    InvoiceStatus,
    NumberSeries,
)
from billing.services.cycle import billing_cycle_run
from billing.services.documents import credit_note_issue, invoice_void
from billing.services.runs import run_timeout
from core.errors import SemanticError
from leasing.models import Lease
from tests.clock import at
from tests.conftest import REPO, _worker_env
from tests.scenarios import lease_h200

TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)
# Billable hours per GPU: January from the passing acceptance run on the 11th at 12:00, then
# whole months of February, March and April.
HOURS_PER_GPU = {1: 20 * 24 + 12, 2: 28 * 24, 3: 31 * 24, 4: 30 * 24}
# Every period January to April has ended, and its grace hour too.
AS_OF = datetime(2026, 5, 1, 2, tzinfo=UTC)


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


@pytest.fixture
def leases(provider: Organization, customer: Organization, other_customer: Organization):
    """Two leases of the provider: 8 GPUs at 2.40 and 4 GPUs at 3.10 USD per GPU-hour."""
    return [
        lease_h200(provider, customer, gpus=8, rate="2.40"),
        lease_h200(provider, other_customer, gpus=4, rate="3.10"),
    ]


def expected_totals(leases: list[Lease]) -> dict[tuple[int, int], Decimal]:
    """(contract, month) → GPU-hours x rate, to the cent, plus tax rounded once."""
    totals = {}
    for lease in leases:
        rate = lease.contract.base_rate_per_gpu_hour
        assert rate is not None
        for month, hours in HOURS_PER_GPU.items():
            usage = cents(Decimal(lease.gpu_count * hours) * rate)
            totals[lease.contract_id, month] = usage + cents(
                usage * settings.BILLING_TAX_RATE_PCT / 100
            )
    return totals


def cycle(when: datetime = AS_OF) -> BillingRun:
    with time_machine.travel(when, tick=False):
        return billing_cycle_run(now=when, deliver=False)


def live_invoices(issuer: Organization) -> list[Invoice]:
    return list(
        Invoice.objects.filter(issuer=issuer)
        .exclude(status=InvoiceStatus.VOID)
        .order_by("contract_id", "period_start")
    )


def snapshot(issuer: Organization) -> list[tuple[Any, ...]]:
    return [
        (
            invoice.pk,
            invoice.number,
            invoice.status,
            invoice.total,
            list(invoice.lines.values_list("position", "kind", "quantity", "amount")),
        )
        for invoice in Invoice.objects.filter(issuer=issuer).order_by("pk")
    ]


def assert_billed_once_without_gaps(issuer: Organization, leases: list[Lease]) -> None:
    """One finalized invoice per contract and period, with its amount; numbers 1..n, no gap."""
    invoices = live_invoices(issuer)
    totals = expected_totals(leases)
    assert {(i.contract_id, i.period_start.month): i.total for i in invoices} == totals
    assert len(invoices) == len(totals)
    assert {i.status for i in invoices} == {InvoiceStatus.FINALIZED}
    numbers = list(
        Invoice.objects.filter(issuer=issuer)
        .order_by("sequence_number")
        .values_list("sequence_number", flat=True)
    )
    assert numbers == list(range(1, len(numbers) + 1))
    sequence = DocumentSequence.objects.get(issuer=issuer, series=NumberSeries.INVOICE, year=2026)
    assert sequence.last_number == len(numbers)
    # One card-hours line per invoice, nothing stored twice.
    for invoice in invoices:
        assert list(invoice.lines.values_list("position", "kind")) == [(1, "card_hours")]


def wait_for(predicate: Callable[[], bool], seconds: float = 45) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


# ---------------------------------------------------------------- concurrency

WAITING_ON = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
  AND query ILIKE %s
"""
# Long queries are cut in pg_stat_activity: match the start of the locking reads.
NUMBER_QUERY = 'SELECT "billing_documentsequence".%'
# Finalization locks the invoice's contract before the invoice (docs/architecture.md, Locks).
CONTRACT_LOCK_QUERY = 'SELECT "contracts_contract".%'


def sessions_waiting_on(query: str) -> int:
    """How many other sessions of this database wait for a row lock in a query like `query`."""
    with connection.cursor() as cursor:
        cursor.execute(WAITING_ON, [query])
        return cursor.fetchone()[0]


def hold_number_row(sequence: DocumentSequence) -> Any:
    """A second connection with the issuer's number row locked: finalizations wait on it."""
    holder = connections.create_connection("default")
    holder.set_autocommit(False)
    with holder.cursor() as cursor:
        cursor.execute(
            "SELECT last_number FROM billing_documentsequence WHERE id = %s FOR UPDATE",
            [sequence.pk],
        )
    return holder


def cycles_at_once(count: int, *, meanwhile: Callable[[], None] = lambda: None) -> list[Any]:
    """`count` billing runs started together from their own threads (and connections)."""
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait()
            outcomes[index] = billing_cycle_run(now=AS_OF, deliver=False)
        except BaseException as exc:  # the main thread reports it
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    try:
        meanwhile()
    finally:
        for thread in threads:
            thread.join(timeout=60)
    assert [isinstance(outcome, BillingRun) for outcome in outcomes] == [True] * count, outcomes
    return outcomes


@TRANSACTIONAL
def test_two_cycles_at_once_make_one_invoice_per_period(
    leases: list[Lease], provider: Organization
) -> None:
    runs = cycles_at_once(2)
    assert_billed_once_without_gaps(provider, leases)
    # Between them the two runs drafted each invoice once.
    assert sum(run.drafts_created for run in runs) == 8
    assert [run.failures for run in runs] == [[], []]


@TRANSACTIONAL
def test_two_cycles_at_once_each_log_only_the_invoices_they_finalized(
    leases: list[Lease], provider: Organization
) -> None:
    # Both runs plan the same batch: one locks its contracts, drafts the first period and waits
    # for the number, the other waits for the contracts. The second then finds everything billed.
    sequence = DocumentSequence.objects.create(
        issuer=provider, series=NumberSeries.INVOICE, year=2026
    )
    holder = hold_number_row(sequence)

    def release_once_both_wait() -> None:
        try:
            assert wait_for(
                lambda: (
                    sessions_waiting_on(NUMBER_QUERY) == 1
                    and sessions_waiting_on(CONTRACT_LOCK_QUERY) == 1
                )
            )
        finally:
            holder.rollback()
            holder.close()

    runs = cycles_at_once(2, meanwhile=release_once_both_wait)
    assert_billed_once_without_gaps(provider, leases)
    finalized = [set(run.summary["finalized"]) for run in runs]
    assert finalized[0].isdisjoint(finalized[1])
    assert finalized[0] | finalized[1] == {i.pk for i in live_invoices(provider)}
    assert sum(run.finalized for run in runs) == 8


# ---------------------------------------------------------------- a worker killed mid-run


def sender_for(folder: Path) -> Celery:
    """A Celery client on a broker folder of this test alone (no other worker takes the task)."""
    app = Celery("billing-cycle-kill-test", set_as_current=False)
    app.conf.update(
        broker_url="filesystem://",
        broker_transport_options={
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "store_processed": False,
        },
        task_routes=settings.CELERY_TASK_ROUTES,
        task_serializer="json",
        accept_content=["json"],
    )
    return app


@TRANSACTIONAL
@pytest.mark.worker
def test_a_worker_killed_inside_finalization_leaves_no_duplicate_and_no_gap(
    leases: list[Lease], provider: Organization, tmp_path: Path
) -> None:
    sequence = DocumentSequence.objects.create(
        issuer=provider, series=NumberSeries.INVOICE, year=2026
    )
    # Another transaction holds the issuer's number: the worker's batch locks both contracts,
    # drafts the first period and blocks inside its finalization, waiting for the sequence row.
    holder = hold_number_row(sequence)
    for folder in ("queue", "processed", "control", "results"):
        (tmp_path / folder).mkdir()
    env = {**_worker_env(), "CELERY_FILESYSTEM_DIR": str(tmp_path)}
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-Q",
            "billing",
            "-P",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "WARNING",
            "-n",
            f"cycle-kill-{tmp_path.name}@%h",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        sender_for(tmp_path).send_task("billing.run_cycle", args=[AS_OF.isoformat()])
        blocked = wait_for(lambda: sessions_waiting_on(NUMBER_QUERY) == 1)
        assert blocked, (tmp_path / "worker.log").read_text()[-3000:]
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=10) == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()
        holder.rollback()
        holder.close()
    # The killed worker's session dies with its transaction; nothing of the batch stays.
    assert wait_for(lambda: sessions_waiting_on(NUMBER_QUERY) == 0, seconds=20)
    assert not Invoice.objects.filter(issuer=provider).exists()
    sequence.refresh_from_db()
    assert sequence.last_number == 0

    # The killed run's row says what it committed: nothing (its one batch rolled back).
    # (Celery reads CELERY_BROKER_URL from the environment before its configuration: on a suite
    # run against Redis, the worker may first take cycle tasks other tests left queued, whose
    # runs complete; the killed run is the one still open.)
    killed = BillingRun.objects.get(kind="cycle", outcome="running")
    assert (killed.outcome, killed.drafts_created, killed.finalized) == ("running", 0, 0)
    assert killed.summary["drafts"] == []

    # The next hourly run, once the killed run is past the timeout, marks it abandoned and
    # says that it took over: the eight invoices the killed run was due to make and issue.
    with time_machine.travel(killed.started_at + run_timeout() + timedelta(minutes=1)):
        rerun = billing_cycle_run(now=AS_OF, deliver=False)
    assert (rerun.drafts_created, rerun.finalized, rerun.picked_up) == (8, 8, 8)
    assert rerun.summary["picked_up_from"] == [killed.pk]
    assert sorted(rerun.summary["picked_up"]) == sorted(i.pk for i in live_invoices(provider))
    killed.refresh_from_db()
    assert (killed.outcome, killed.picked_up_by) == ("abandoned", rerun)
    assert killed.finished_at is not None
    assert_billed_once_without_gaps(provider, leases)


# ---------------------------------------------------------------- reruns, void and reissue


@pytest.mark.django_db
def test_a_rerun_after_everything_is_billed_changes_nothing(
    leases: list[Lease], provider: Organization
) -> None:
    first = cycle()
    assert_billed_once_without_gaps(provider, leases)
    billed = snapshot(provider)
    ids = [invoice[0] for invoice in billed]
    assert (first.drafts_created, first.finalized, first.failures) == (8, 8, [])
    assert sorted(first.summary["drafts"]) == sorted(first.summary["finalized"]) == ids
    assert (first.as_of, first.finished_at is not None) == (AS_OF, True)

    again = cycle(AS_OF + timedelta(hours=1))
    assert snapshot(provider) == billed
    assert (again.drafts_created, again.finalized, again.failures) == (0, 0, [])
    assert again.summary == {"drafts": [], "finalized": [], "batches": 0}
    assert BillingRun.objects.count() == 2


@pytest.mark.django_db
def test_a_voided_invoice_is_reissued_by_the_next_cycle_with_a_new_number(
    leases: list[Lease], provider: Organization
) -> None:
    cycle()
    february = Invoice.objects.get(contract=leases[0].contract, period_start=at(2, 1))
    number = february.number
    lines = list(february.lines.values_list("kind", "quantity", "unit_price", "amount"))
    invoice_void(invoice=february, reason="wrong billing address", actor="ops", now=AS_OF)

    run = cycle(AS_OF + timedelta(hours=1))
    assert (run.drafts_created, run.finalized) == (1, 1)
    february.refresh_from_db()
    assert (february.status, february.number) == (InvoiceStatus.VOID, number)
    reissued = Invoice.objects.get(
        contract=leases[0].contract, period_start=at(2, 1), status=InvoiceStatus.FINALIZED
    )
    assert reissued.pk != february.pk
    assert reissued.number == f"INV-{provider.slug.upper()}-2026-000009"
    assert list(reissued.lines.values_list("kind", "quantity", "unit_price", "amount")) == lines
    # The void number still counts: 1..9 without a gap, 8 live invoices.
    assert_billed_once_without_gaps(provider, leases)
    assert Invoice.objects.filter(issuer=provider).count() == 9


# ---------------------------------------------------------------- credit notes


@pytest.mark.django_db
def test_credit_notes_stay_within_the_total_and_are_numbered_in_their_own_series(
    leases: list[Lease], provider: Organization, settings: Any
) -> None:
    settings.BILLING_TAX_RATE_PCT = Decimal("10")
    cycle()
    january = Invoice.objects.get(contract=leases[0].contract, period_start=at(1, 10))
    february = Invoice.objects.get(contract=leases[0].contract, period_start=at(2, 1))
    usage = cents(Decimal(8 * HOURS_PER_GPU[1]) * Decimal("2.40"))  # 9,446.40
    assert (january.subtotal, january.tax, january.total) == (
        usage,
        cents(usage / 10),
        usage + cents(usage / 10),
    )

    def issue(invoice: Invoice, amount: str) -> CreditNote:
        return credit_note_issue(
            invoice=invoice, reason="goodwill", actor="ops", amount=Decimal(amount), now=AS_OF
        )

    first = issue(january, "1000.00")  # 1,000.00 + 10 % tax = 1,100.00
    assert (first.subtotal, first.tax, first.total) == (
        Decimal("1000.00"),
        Decimal("100.00"),
        Decimal("1100.00"),
    )
    remaining = january.total - first.total  # 9,291.04 = 8,446.40 + 844.64 tax
    # One cent more than what is left (with its tax) is refused, and nothing is written.
    with pytest.raises(SemanticError) as refused:
        issue(january, str(remaining / Decimal("1.1") + Decimal("0.01")))
    assert refused.value.code == "credit_exceeds_invoice"
    january.refresh_from_db()
    assert january.credited_total == first.total
    assert CreditNote.objects.count() == 1
    assert (
        DocumentSequence.objects.get(
            issuer=provider, series=NumberSeries.CREDIT_NOTE, year=2026
        ).last_number
        == 1
    )

    second = issue(february, "50.00")
    last = issue(january, str(remaining / Decimal("1.1")))  # exactly what is left
    january.refresh_from_db()
    assert last.total == remaining
    assert january.credited_total == january.total
    with pytest.raises(SemanticError):
        issue(january, "0.01")

    prefix = f"CN-{provider.slug.upper()}-2026-"
    assert [note.number for note in (first, second, last)] == [
        f"{prefix}00000{n}" for n in (1, 2, 3)
    ]
    assert [note.sequence_number for note in CreditNote.objects.order_by("pk")] == [1, 2, 3]
    # Credit notes take no invoice number, and the invoices stay as issued.
    assert_billed_once_without_gaps(provider, leases)
    assert InvoiceLine.objects.filter(invoice=january).count() == 1
