"""A worker SIGKILLed mid-task and started again bills exactly as an undisturbed run does.

The broker is a private Redis (kombu's Redis transport, as on CI and in production). With
task_acks_late the message of a running task stays in the broker's unacked set until the task
returns; after a SIGKILL nobody acknowledges or rejects it (task_reject_on_worker_lost only helps
when a pool child dies under a living parent), so the next worker puts it back in its queue once
the visibility timeout has passed — an hour by default, a few seconds in these tests (see
tools.VISIBILITY_TIMEOUT_S) — and runs it again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from billing.models import (
    BillingRun,
    BillingRunKind,
    BillingRunOutcome,
    DocumentSequence,
    Invoice,
    NumberSeries,
)
from tests.core.test_metrics import scrape, value
from tests.faults.billing_data import (
    AS_OF,
    INVOICES_PER_PROVIDER,
    Scenario,
    billed,
    emails_per_invoice,
    scenario,
    stripe_billed,
    stripe_invoices_by_ours,
    wait_delivered,
)
from tests.faults.conftest import StartWorker
from tests.faults.tools import (
    HeldStripe,
    RedisServer,
    StalledInserts,
    send_task,
    sessions_waiting_on_rows,
    wait_for,
)

TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def run_cycle(broker: RedisServer) -> None:
    """What beat does every hour: send billing.run_cycle, here as of AS_OF."""
    send_task(broker.url, "billing.run_cycle", AS_OF.isoformat())


def assert_same_as_undisturbed(
    disturbed: Scenario, undisturbed: Scenario, stripe: HeldStripe, mail: Path
) -> None:
    """Same invoices, lines and totals, numbers 1..4, one e-mail and one Stripe invoice each."""
    assert billed(disturbed) == billed(undisturbed)
    numbers = sorted(row[4] for row in billed(disturbed))
    assert numbers == list(range(1, INVOICES_PER_PROVIDER + 1))
    sequence = DocumentSequence.objects.get(
        issuer=disturbed.provider, series=NumberSeries.INVOICE, year=AS_OF.year
    )
    assert sequence.last_number == INVOICES_PER_PROVIDER
    assert emails_per_invoice(mail, disturbed) == [1] * INVOICES_PER_PROVIDER
    on_stripe = stripe_billed(disturbed, stripe)
    assert on_stripe == stripe_billed(undisturbed, stripe)
    # Exactly one Stripe invoice per invoice: ours, open, its one item, sent once.
    assert [len(remotes) for remotes in on_stripe] == [1] * INVOICES_PER_PROVIDER
    assert {(remote[0], remote[1], remote[4]) for (remote,) in on_stripe} == {(True, "open", 1)}


@TRANSACTIONAL
@pytest.mark.worker
@pytest.mark.parametrize(
    ("phase", "stalled_table"),
    [
        pytest.param("drafting", "billing_invoiceline", id="drafting"),
        pytest.param("finalizing", "billing_invoiceevent", id="finalizing"),
    ],
)
def test_a_worker_killed_while_billing_an_invoice_bills_as_an_undisturbed_run(
    phase: str,
    stalled_table: str,
    private_redis: RedisServer,
    held_stripe: HeldStripe,
    start_worker: StartWorker,
    tmp_path: Path,
) -> None:
    undisturbed = scenario(f"calm-{phase}")
    worker = start_worker()
    run_cycle(private_redis)
    wait_delivered(undisturbed)

    disturbed = scenario(f"kill-{phase}")
    # The second lease's February invoice, the last of the run: its line is written when its
    # draft is made, its finalization event when it is issued (three other invoices took numbers
    # 1 to 3 before it). The four invoices are one batch, one transaction: nothing is committed
    # at the kill.
    last = disturbed.line_insert_of(lease=1, month=2)  # a condition on NEW.invoice_id
    with StalledInserts(stalled_table, last) as stall:
        run_cycle(private_redis)
        stall.wait_stalled()
        worker.kill()
        made = Invoice.objects.filter(issuer=disturbed.provider)
        numbered = made.filter(sequence_number__isnull=False)
        assert (made.count(), numbered.count()) == (0, 0)
        # The killed worker's server session still waits in the trigger with its transaction
        # open (PostgreSQL notices a dead client only when it next writes to it): the new
        # worker's rerun must wait for the dead run's row locks, then go on once they go.
        start_worker()
        wait_for(
            lambda: sessions_waiting_on_rows() > 0,
            seconds=60,
            what="the redelivered run_cycle to wait for the killed run's row lock",
        )
        stall.release()
        wait_delivered(disturbed)

    assert_same_as_undisturbed(disturbed, undisturbed, held_stripe, tmp_path / "mail")
    # The killed run never closed its log row: the rerun marked it abandoned and did the rest.
    runs = BillingRun.objects.filter(kind=BillingRunKind.CYCLE, as_of=AS_OF).order_by("pk")
    assert [run.outcome for run in runs] == ["completed", "abandoned", "completed"]
    assert [run.finished_at is not None for run in runs] == [True, True, True]
    assert runs[1].picked_up_by == runs[2]


@TRANSACTIONAL
@pytest.mark.worker
def test_a_worker_killed_mid_cycle_leaves_an_abandoned_run_that_the_next_run_accounts_for(
    private_redis: RedisServer,
    held_stripe: HeldStripe,
    start_worker: StartWorker,
    tmp_path: Path,
    client: Client,
) -> None:
    undisturbed = scenario("calm-abandon")
    worker = start_worker()
    run_cycle(private_redis)
    wait_delivered(undisturbed)

    disturbed = scenario("kill-abandon")
    # The worker dies in the fourth and last draft of the run: its batch (all four invoices, one
    # transaction) has committed nothing.
    with StalledInserts("billing_invoiceline", disturbed.line_insert_of(lease=1, month=2)) as stall:
        run_cycle(private_redis)
        stall.wait_stalled()
        worker.kill()
        killed = BillingRun.objects.filter(kind=BillingRunKind.CYCLE).latest("pk")
        committed = Invoice.objects.filter(issuer=disturbed.provider)
        # Its row says what it committed: the counts are written with each batch.
        assert (killed.outcome, killed.finished_at) == (BillingRunOutcome.RUNNING, None)
        assert (killed.drafts_created, killed.finalized) == (0, 0)
        assert sorted(killed.summary["drafts"]) == sorted(committed.values_list("pk", flat=True))
        # While it is open, /metrics shows it running, not as a run without failure.
        samples = scrape(client)
        assert value(samples, "cardhour_billing_runs_running", kind="cycle") == 1
        assert value(samples, "cardhour_billing_runs_abandoned_total", kind="cycle") == 0

        # The task comes back after the visibility timeout, by then past the run timeout
        # (tools.RUN_TIMEOUT_S, shorter as in production): the rerun abandons the killed run.
        start_worker()
        wait_for(
            lambda: sessions_waiting_on_rows() > 0,
            seconds=60,
            what="the redelivered run_cycle to wait for the killed run's row lock",
        )
        stall.release()
        wait_delivered(disturbed)

    # Nothing missing, nothing twice: exactly what an undisturbed run bills.
    assert_same_as_undisturbed(disturbed, undisturbed, held_stripe, tmp_path / "mail")
    killed.refresh_from_db()
    rerun = BillingRun.objects.get(kind=BillingRunKind.CYCLE, picked_up_from=killed)
    assert killed.outcome == BillingRunOutcome.ABANDONED
    assert killed.finished_at is not None
    assert (killed.drafts_created, killed.finalized) == (0, 0)
    # The rerun counts only its own share, and says what it took over from whom.
    assert (rerun.outcome, rerun.drafts_created, rerun.finalized) == ("completed", 4, 4)
    assert rerun.summary["picked_up_from"] == [killed.pk]
    live = [invoice.pk for invoice in disturbed.invoices()]
    assert sorted(rerun.summary["picked_up"]) == sorted(live)
    assert rerun.picked_up == len(live)
    # Between them, every invoice drafted once and finalized once.
    assert sorted(killed.summary["drafts"] + rerun.summary["drafts"]) == sorted(live)
    assert sorted(rerun.summary["finalized"]) == sorted(live)

    samples = scrape(client)
    assert value(samples, "cardhour_billing_runs_running", kind="cycle") == 0
    assert value(samples, "cardhour_billing_runs_abandoned_total", kind="cycle") == 1
    assert value(samples, "cardhour_billing_runs_failed_total", kind="cycle") == 1
    assert value(samples, "cardhour_billing_runs_total", kind="cycle") == 3


@TRANSACTIONAL
@pytest.mark.worker
def test_a_worker_killed_before_it_hears_that_stripe_made_the_invoice_pushes_it_once(
    private_redis: RedisServer,
    held_stripe: HeldStripe,
    start_worker: StartWorker,
    tmp_path: Path,
) -> None:
    undisturbed = scenario("calm-push")
    worker = start_worker()
    run_cycle(private_redis)
    wait_delivered(undisturbed)

    disturbed = scenario("kill-push")
    # The first Stripe invoice of the run is made (and its answer stored for an idempotent
    # replay), but its answer is held: the worker dies without knowing the Stripe invoice id.
    held_stripe.hold(r"^/v1/invoices$")
    run_cycle(private_redis)
    wait_for(
        lambda: held_stripe.holds()["held"] == 1,
        seconds=60,
        what="the worker to wait for Stripe's answer to its invoice",
    )
    worker.kill()
    held_stripe.release()  # the answer goes to a closed socket
    (made,) = [
        key for key in stripe_invoices_by_ours(held_stripe) if key not in known_ids(undisturbed)
    ]
    pushed = Invoice.objects.get(pk=int(made))
    assert pushed.issuer_id == disturbed.provider.pk
    assert pushed.emailed_at is not None
    assert (pushed.stripe_invoice_id, pushed.stripe_pushed_at) == ("", None)

    start_worker()
    wait_delivered(disturbed)

    assert_same_as_undisturbed(disturbed, undisturbed, held_stripe, tmp_path / "mail")
    pushed.refresh_from_db()
    assert pushed.stripe_invoice_id == stripe_invoices_by_ours(held_stripe)[made][0]["id"]


def known_ids(subject: Scenario) -> set[str]:
    return {str(invoice.pk) for invoice in subject.invoices()}
