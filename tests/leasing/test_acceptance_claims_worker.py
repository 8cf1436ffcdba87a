"""The beat job that applies the clause's rule on silence, run by a real Celery worker: the task
beat sends (by name, on its queue) disputes a claim nobody answered, and a rerun moves nothing."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from celery import current_app
from django.conf import settings
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from contracts.choices import ContractStatus, EventKind
from contracts.models import AcceptanceRun, ContractEvent
from contracts.services import acceptance_run_record, contract_activate
from tests.contracts.factories import ACCEPTANCE_TOKENS, h200_contract

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.worker,
]

TASK = "leasing.resolve_acceptance_claims"


def wait_for(predicate, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_beat_disputes_an_unanswered_claim_on_the_worker_once(
    celery_worker_process, provider, customer
):
    schedule = PeriodicTask.objects.get(task=TASK)
    assert (schedule.queue, schedule.interval.every, schedule.interval.period) == (
        "default",
        10,
        "minutes",
    )
    assert settings.CELERY_TASK_ROUTES[TASK] == {"queue": "default"}
    contract = contract_activate(
        contract=h200_contract(provider, customer, clauses=[ACCEPTANCE_TOKENS]),
        actor="ops",
        at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    # A claim posted four days ago: its 72-hour window closed a day ago, unanswered.
    posted = timezone.now() - timedelta(days=4)
    run, _ = acceptance_run_record(
        contract=contract,
        party="lessor",
        organization=provider,
        metric="output_tokens_per_s",
        measured_value=Decimal("99999"),
        ran_at=posted,
        actor="provider",
        now=posted,
    )
    current_app.send_task(TASK, queue="default")
    disputed = AcceptanceRun.objects.filter(pk=run.pk, status="disputed")
    assert wait_for(disputed.exists), "the worker never applied the rule on silence"
    current_app.send_task(TASK, queue="default")
    time.sleep(3)
    contract.refresh_from_db()
    assert (contract.status, contract.billing_start) == (ContractStatus.PENDING_ACCEPTANCE, None)
    moves = ContractEvent.objects.filter(contract=contract, kind=EventKind.ACCEPTANCE_DISPUTED)
    assert moves.count() == 1
    assert moves.get().actor == "system:acceptance-claims"
