"""Thin Celery tasks of billing; each calls a service and is safe to rerun.

Queues come from CELERY_TASK_ROUTES: `billing.ingest_*` runs on `ingest`, the rest on `billing`.
The cycle, delivery and sweep tasks say `acks_late` themselves (the project default too): a
worker killed mid-run leaves the message unacknowledged, so the broker hands it out again (Redis:
after CELERY_VISIBILITY_TIMEOUT_SECONDS) and the rerun picks up what is left.
"""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from billing.services.budgets import budgets_evaluate
from billing.services.cycle import billing_cycle_finish, billing_cycle_run
from billing.services.cycle_batch import billing_batch_run
from billing.services.delivery import invoice_deliver
from billing.services.funds_policy import funds_policies_evaluate
from billing.services.grants import credit_grants_expire
from billing.services.ledger_runs import ledger_reconciliation_run
from billing.services.partitions import usage_partitions_ensure
from billing.services.payout_runs import payout_run
from billing.services.reconciliation import usage_reconciliation_run
from billing.services.rollups import usage_rollups_refresh, usage_rollups_refresh_batch
from billing.services.runs import billing_runs_abandon_stale
from billing.services.stripe import StripeUnavailable
from billing.services.top_ups import top_ups_resume
from billing.services.usage_alerts import (
    usage_alerts_evaluate,
    usage_checks_after_batch,
    usage_checks_after_sweep,
)


@shared_task(name="billing.rollup_usage")
def rollup_usage(since: str | None = None) -> int:
    """Periodic sweep: refresh the hourly rollups touched by events received since the last run."""
    run = usage_rollups_refresh(since=parse_datetime(since) if since else None)
    usage_checks_after_sweep()
    return run.hours_refreshed


# Nobody reads its result: sending it then never waits on the result backend (with Redis, the
# broker's server) inside the request that committed the batch.
@shared_task(name="billing.ingest_rollup_refresh", ignore_result=True)
def ingest_rollup_refresh(batch_id: int) -> int:
    """Right after a batch committed: refresh the hourly rollups its events touched, then ask for
    the usage alerts of its contracts and the budgets of their customers to be evaluated."""
    hours = usage_rollups_refresh_batch(batch_id=batch_id)
    usage_checks_after_batch(batch_id=batch_id)
    return hours


@shared_task(name="billing.usage_partitions_ensure")
def ensure_usage_partitions(as_of: str | None = None) -> dict[str, object]:
    """Beat: monthly partitions of usage events for this month and the next ones; rows that fell
    into the DEFAULT partition moved to a partition of their month. A rerun changes nothing."""
    now = parse_datetime(as_of) if as_of else None
    return usage_partitions_ensure(now=now or timezone.now()).as_dict()


@shared_task(name="billing.run_cycle", acks_late=True)
def run_cycle(as_of: str | None = None) -> int:
    """Beat: bill ended periods and drafts past grace, in batches fanned out over the workers
    (`billing.cycle_batch`); returns the run id."""
    return billing_cycle_run(now=parse_datetime(as_of) if as_of else None, fan_out=True).pk


@shared_task(name="billing.cycle_batch", acks_late=True)
def cycle_batch(
    run_id: int, batch: int, contract_ids: list[int], as_of: str, deliver: bool = True
) -> dict[str, int]:
    """One batch of a cycle run; the last batch to finish closes the run. Safe to rerun."""
    now = parse_datetime(as_of)
    assert now is not None
    outcome = billing_batch_run(
        run_id=run_id, batch=batch, contract_ids=contract_ids, now=now, deliver=deliver
    )
    billing_cycle_finish(run_id=run_id, deliver=deliver)
    return {
        "drafted": len(outcome.drafted),
        "finalized": len(outcome.finalized),
        "failures": len(outcome.failures),
    }


@shared_task(
    name="billing.deliver_invoice",
    acks_late=True,
    # Stripe being down is worth waiting for; every other failure is recorded in the run log.
    autoretry_for=(StripeUnavailable,),
    retry_backoff=True,
    retry_backoff_max=600,
    max_retries=8,
)
def deliver_invoice(invoice_id: int) -> dict[str, object]:
    """PDF, e-mail and Stripe for one finalized invoice; every step resumes where it stopped."""
    return invoice_deliver(invoice_id=invoice_id)


@shared_task(name="billing.reconcile_usage")
def reconcile_usage() -> int:
    """Nightly: accepted usage against issued invoices; returns the reconciliation run's id."""
    run, _ = usage_reconciliation_run()
    return run.pk


@shared_task(name="billing.abandon_stale_runs", acks_late=True)
def abandon_stale_runs() -> list[int]:
    """Beat: mark cycle and delivery runs open past BILLING_RUN_TIMEOUT_MINUTES abandoned."""
    return billing_runs_abandon_stale()


@shared_task(name="billing.reconcile_ledger")
def reconcile_ledger() -> int:
    """Nightly: the ledger against the documents; returns the `ledger` run's id."""
    return ledger_reconciliation_run().pk


@shared_task(name="billing.evaluate_budgets", ignore_result=True)
def evaluate_budgets(organization_ids: list[int] | None = None) -> int:
    """After usage or an invoice (those organizations), and from beat (all): budgets against this
    month's and last month's spend; returns how many thresholds were newly crossed."""
    return budgets_evaluate(organization_ids=organization_ids)


@shared_task(name="billing.evaluate_usage_alerts", ignore_result=True)
def evaluate_usage_alerts(contract_ids: list[int] | None = None) -> int:
    """After a rollup refresh: usage alert rules on those contracts (all after a sweep)."""
    return usage_alerts_evaluate(contract_ids=contract_ids)


@shared_task(
    name="billing.run_payouts",
    acks_late=True,
    # Stripe being down is worth waiting for; the rerun resumes every unfinished payout.
    autoretry_for=(StripeUnavailable,),
    retry_backoff=True,
    retry_backoff_max=600,
    max_retries=8,
)
def run_payouts(as_of: str | None = None) -> dict[str, object]:
    """Beat (daily): last month's statements and payouts, and every unfinished payout pushed on."""
    outcome = payout_run(now=parse_datetime(as_of) if as_of else None)
    return {
        "period_start": outcome.period_start.isoformat(),
        "statements": outcome.statements,
        "payouts": outcome.payouts,
        "paid": outcome.paid,
        "failed": outcome.failed,
    }


@shared_task(name="billing.expire_grants", acks_late=True)
def expire_grants() -> int:
    """Beat (hourly): take back the unused rest of grants whose expiry passed."""
    return credit_grants_expire()


@shared_task(name="billing.evaluate_funds", acks_late=True)
def evaluate_funds() -> int:
    """Beat (hourly): project each funds policy's balance and act; returns how many triggered."""
    return funds_policies_evaluate()


@shared_task(name="billing.resume_top_ups", acks_late=True)
def resume_top_ups() -> int:
    """Beat (hourly): charge again the card top-ups left pending; returns how many settled."""
    return top_ups_resume()
