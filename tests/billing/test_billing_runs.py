"""Billing runs left open by a killed worker: abandoned past the timeout, picked up, never silent.

A run that "dies" here is the row a run writes when it starts (`billing_run_open`) and never
closes, as a worker killed right after does; a real SIGKILLed worker is in
tests/billing/test_billing_cycle.py and tests/faults/test_worker_kill.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from billing.models import BillingRun, BillingRunKind, BillingRunOutcome, Invoice
from billing.services.cycle import _lost_handovers
from billing.services.delivery import invoice_deliver
from billing.services.runs import billing_run_complete, billing_run_open, run_timeout
from billing.tasks import abandon_stale_runs, deliver_invoice, run_cycle
from config.celery import app
from tests.billing.invoice_factories import make_issued_invoice
from tests.conftest import REPO

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 2, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def opened(kind: str = BillingRunKind.CYCLE, *, at: datetime = T0, **summary: int) -> BillingRun:
    """A run that wrote its row at `at` and whose worker died right after."""
    with time_machine.travel(at, tick=False):
        run, _ = billing_run_open(kind=kind, as_of=at, summary=summary or None)
    return run


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path: Path) -> Path:
    """Delivery stores its PDFs in the test's own directory; Stripe stays off."""
    settings.MEDIA_ROOT = str(tmp_path)
    settings.STRIPE_API_KEY = ""
    return tmp_path


# ---------------------------------------------------------------- the sweep


def test_the_sweep_abandons_runs_open_past_the_timeout_and_leaves_younger_ones_open():
    killed = opened(at=T0)
    young = opened(BillingRunKind.DELIVERY, at=T0 + run_timeout() - MINUTE, invoice_id=7)

    with time_machine.travel(T0 + run_timeout() - MINUTE / 2, tick=False):
        assert abandon_stale_runs() == []
    sweep_at = T0 + run_timeout() + MINUTE
    with time_machine.travel(sweep_at, tick=False):
        assert abandon_stale_runs() == [killed.pk]

    killed.refresh_from_db()
    young.refresh_from_db()
    assert (killed.outcome, killed.finished_at, killed.picked_up_by) == (
        BillingRunOutcome.ABANDONED,
        sweep_at,
        None,
    )
    assert (young.outcome, young.finished_at) == (BillingRunOutcome.RUNNING, None)
    # A second sweep finds nothing more to do.
    with time_machine.travel(sweep_at + MINUTE, tick=False):
        assert abandon_stale_runs() == []


def test_the_sweep_runs_every_ten_minutes_on_beat():
    task = PeriodicTask.objects.get(task="billing.abandon_stale_runs")
    assert task.queue == "billing" and task.enabled
    assert (task.interval.every, task.interval.period) == (10, "minutes")


def test_a_run_the_sweep_abandoned_is_picked_up_by_the_next_run_of_its_kind_only():
    killed = opened(at=T0)
    after = T0 + run_timeout() + MINUTE
    with time_machine.travel(after, tick=False):
        abandon_stale_runs()
        delivery, taken = billing_run_open(
            kind=BillingRunKind.DELIVERY, as_of=after, summary={"invoice_id": 1}
        )
        assert taken == []
        next_cycle = BillingRun.objects.get(pk=run_cycle(after.isoformat()))

    killed.refresh_from_db()
    assert killed.picked_up_by == next_cycle
    assert next_cycle.summary["picked_up_from"] == [killed.pk]
    assert next_cycle.outcome == BillingRunOutcome.COMPLETED
    assert "picked_up_from" not in delivery.summary
    # Picked up once: the run after does not claim it again.
    with time_machine.travel(after + timedelta(hours=1), tick=False):
        later = BillingRun.objects.get(pk=run_cycle((after + timedelta(hours=1)).isoformat()))
    assert "picked_up_from" not in later.summary
    assert later.picked_up == 0


def test_a_run_marked_abandoned_that_finishes_after_all_keeps_its_outcome_and_its_counts():
    slow = opened(at=T0)
    with time_machine.travel(T0 + run_timeout() + MINUTE, tick=False):
        abandon_stale_runs()
    slow.drafts_created = 3
    with time_machine.travel(T0 + run_timeout() + 2 * MINUTE, tick=False):
        billing_run_complete(run=slow, fields=["drafts_created", "summary"])

    slow.refresh_from_db()
    assert (slow.outcome, slow.finished_at) == (
        BillingRunOutcome.ABANDONED,
        T0 + run_timeout() + MINUTE,
    )
    assert slow.drafts_created == 3
    assert (
        slow.summary["finished_after_abandoned_at"] == (T0 + run_timeout() + 2 * MINUTE).isoformat()
    )


# ---------------------------------------------------------------- delivery runs


def test_a_delivery_takes_over_only_its_own_invoices_abandoned_run(provider, customer):
    customer.billing_emails = ["ap@example.com"]
    customer.save(update_fields=["billing_emails"])
    invoice = make_issued_invoice(provider, customer)  # issued on 2026-02-01 at 02:00
    killed = opened(BillingRunKind.DELIVERY, at=T0, invoice_id=invoice.pk)
    other = opened(BillingRunKind.DELIVERY, at=T0, invoice_id=invoice.pk + 1000)

    # An abandoned delivery run has a finished_at but delivered nothing: the cycle still hands
    # the invoice over again.
    with time_machine.travel(T0 + run_timeout() + MINUTE, tick=False):
        assert abandon_stale_runs() == [killed.pk, other.pk]
        assert _lost_handovers(now=timezone.now(), exclude=[]) == [invoice.pk]
        result = deliver_invoice(invoice.pk)

    killed.refresh_from_db()
    other.refresh_from_db()
    run = BillingRun.objects.get(pk=result["run_id"])
    assert (killed.outcome, killed.picked_up_by) == (BillingRunOutcome.ABANDONED, run)
    assert (run.outcome, run.delivered, run.picked_up) == (BillingRunOutcome.COMPLETED, 1, 1)
    assert run.summary["picked_up_from"] == [killed.pk]
    assert run.summary["steps"] == {"pdf": "stored", "email": "sent", "stripe": "disabled"}
    # Another invoice's abandoned run waits for a delivery of its own invoice.
    assert (other.outcome, other.picked_up_by) == (BillingRunOutcome.ABANDONED, None)
    assert _lost_handovers(now=T0 + timedelta(hours=2), exclude=[]) == []


def test_a_killed_delivery_run_shows_the_steps_it_finished(provider, customer, monkeypatch):
    """Each step is on the run's row as soon as it is done, not only when the run ends."""
    customer.billing_emails = ["ap@example.com"]
    customer.save(update_fields=["billing_emails"])
    invoice = make_issued_invoice(provider, customer)

    def killed(**kwargs: object) -> Invoice:
        raise SystemExit("SIGKILL")  # nothing after this line runs, as in a killed worker

    monkeypatch.setattr("billing.services.delivery.invoice_email", killed)
    with pytest.raises(SystemExit):
        invoice_deliver(invoice_id=invoice.pk)
    run = BillingRun.objects.get(kind=BillingRunKind.DELIVERY)
    assert (run.outcome, run.finished_at) == (BillingRunOutcome.RUNNING, None)
    assert run.summary == {
        "invoice_id": invoice.pk,
        "number": invoice.number,
        "steps": {"pdf": "stored"},
    }


# ---------------------------------------------------------------- the database's word


@pytest.mark.parametrize(
    ("outcome", "finished"),
    [
        (BillingRunOutcome.RUNNING, True),
        (BillingRunOutcome.COMPLETED, False),
        (BillingRunOutcome.ABANDONED, False),
        ("lost", True),
    ],
)
def test_the_database_refuses_an_outcome_that_disagrees_with_finished_at(outcome, finished):
    with pytest.raises(IntegrityError), transaction.atomic():
        BillingRun.objects.create(
            kind=BillingRunKind.CYCLE,
            started_at=T0,
            as_of=T0,
            outcome=outcome,
            finished_at=T0 if finished else None,
        )


def test_the_database_refuses_a_pick_up_of_a_run_that_was_not_abandoned():
    running = opened(at=T0)
    later = opened(at=T0 + MINUTE)
    with pytest.raises(IntegrityError), transaction.atomic():
        BillingRun.objects.filter(pk=running.pk).update(picked_up_by=later)
    BillingRun.objects.filter(pk=running.pk).update(
        outcome=BillingRunOutcome.ABANDONED, finished_at=T0 + MINUTE
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        BillingRun.objects.filter(pk=running.pk).update(picked_up_by=running)
    BillingRun.objects.filter(pk=running.pk).update(picked_up_by=later)


# ---------------------------------------------------------------- the broker's redelivery


def test_billing_tasks_are_acknowledged_late_so_a_killed_workers_task_comes_back():
    for name in ("billing.run_cycle", "billing.deliver_invoice", "billing.abandon_stale_runs"):
        assert app.tasks[name].acks_late is True, name
    assert settings.CELERY_TASK_REJECT_ON_WORKER_LOST is True
    # A delivery's retries wait at most 10 minutes: never long enough for Redis to hand the
    # waiting message to a second worker.
    assert app.tasks["billing.deliver_invoice"].retry_backoff_max < 3600


def _settings_of(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Import the settings and the Celery app in a fresh process with `env` on top."""
    script = (
        "import json, django; django.setup();"
        "from django.conf import settings; from config.celery import app;"
        "print(json.dumps({'transport': app.conf.broker_transport_options,"
        " 'timeout': settings.BILLING_RUN_TIMEOUT_MINUTES}))"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, "DJANGO_ENV": "test", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_redis_hands_a_killed_workers_task_back_after_an_hour_half_an_hour_past_the_run_timeout():
    result = _settings_of({"CELERY_BROKER_URL": "redis://127.0.0.1:6379/15"})
    assert result.returncode == 0, result.stderr
    configured = json.loads(result.stdout.strip().splitlines()[-1])
    assert configured == {"transport": {"visibility_timeout": 3600}, "timeout": 30.0}


def test_a_run_timeout_not_shorter_than_the_visibility_timeout_refuses_to_start():
    result = _settings_of(
        {
            "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
            "CELERY_VISIBILITY_TIMEOUT_SECONDS": "1800",
            "BILLING_RUN_TIMEOUT_MINUTES": "30",
        }
    )
    assert result.returncode != 0
    assert "BILLING_RUN_TIMEOUT_MINUTES must be above 0 and shorter than" in result.stderr
