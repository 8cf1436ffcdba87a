"""Billing runs' log rows: opened, kept up to date, completed — or abandoned and picked up.

A cycle or delivery run writes its row when it starts (committed at once) and its counts in the
transaction of each piece of work, so the row says what it committed even if its worker is
killed. A run still open BILLING_RUN_TIMEOUT_MINUTES after it started lost its worker: the next
run of its kind (for a delivery, of the same invoice) or the sweep (`billing.abandon_stale_runs`)
marks it abandoned, and the next run records that it took over (`picked_up_by` on the old row,
`picked_up` and `summary.picked_up_from` on its own).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from billing.locks import abandoned_runs_lock, stale_runs_lock
from billing.models import BillingRun, BillingRunKind, BillingRunOutcome

logger = logging.getLogger(__name__)

# The kinds that stay open while they work; a reconciliation run is written once, finished.
OPEN_KINDS: list[str] = [BillingRunKind.CYCLE, BillingRunKind.DELIVERY]


def run_timeout() -> timedelta:
    """How long a run may stay open before it counts as abandoned."""
    return timedelta(minutes=float(settings.BILLING_RUN_TIMEOUT_MINUTES))


def _abandon(runs: Iterable[BillingRun], *, now: datetime, by: str) -> list[int]:
    """Mark locked open runs abandoned as of `now`; their ids."""
    ids = [run.pk for run in runs]
    if ids:
        BillingRun.objects.filter(pk__in=ids, outcome=BillingRunOutcome.RUNNING).update(
            outcome=BillingRunOutcome.ABANDONED, finished_at=now
        )
        logger.warning(
            "billing runs %s still open after %s: marked abandoned by %s", ids, run_timeout(), by
        )
    return ids


@transaction.atomic
def billing_runs_abandon_stale(*, now: datetime | None = None) -> list[int]:
    """The sweep: mark every cycle and delivery run open past the timeout abandoned; their ids."""
    now = now or timezone.now()
    stale = stale_runs_lock(kinds=OPEN_KINDS, started_before=now - run_timeout())
    return _abandon(stale, now=now, by="the sweep")


@transaction.atomic
def billing_run_open(
    *, kind: str, as_of: datetime, summary: dict[str, Any] | None = None
) -> tuple[BillingRun, list[BillingRun]]:
    """Start a run's row, first abandoning its kind's stale runs; (run, the runs it picks up).

    A delivery run looks only at runs of its own invoice (`summary["invoice_id"]`); a cycle run
    at every cycle run. The picked-up runs point at the new run; what the new run did of their
    work is for its caller to count (`picked_up`).
    """
    started_at = timezone.now()
    invoice_id = (summary or {}).get("invoice_id") if kind == BillingRunKind.DELIVERY else None
    stale = stale_runs_lock(
        kinds=[kind], started_before=started_at - run_timeout(), invoice_id=invoice_id
    )
    _abandon(stale, now=started_at, by=f"the next {kind} run")
    run = BillingRun.objects.create(
        kind=kind, started_at=started_at, as_of=as_of, summary=dict(summary or {})
    )
    taken = abandoned_runs_lock(kind=kind, invoice_id=invoice_id)
    if taken:
        BillingRun.objects.filter(pk__in=[old.pk for old in taken]).update(picked_up_by=run)
        run.summary["picked_up_from"] = [old.pk for old in taken]
        run.save(update_fields=["summary"])
    return run, taken


def billing_run_record(*, run: BillingRun, fields: list[str]) -> None:
    """Write the run's progress, inside the transaction of the work it counts."""
    run.save(update_fields=fields)


# Adds a batch's counts and invoice ids to a cycle run's row, unless that batch was counted
# already (a redelivered task): one statement, so batches running at once never lose a count.
RUN_ADD_SQL = """
UPDATE billing_billingrun SET
    drafts_created = drafts_created + %(drafted)s,
    finalized = finalized + %(finalized)s,
    failures = failures || %(failures)s::jsonb,
    summary = summary || jsonb_build_object(
        'drafts', coalesce(summary->'drafts', '[]'::jsonb) || %(drafts)s::jsonb,
        'finalized', coalesce(summary->'finalized', '[]'::jsonb) || %(finalized_ids)s::jsonb,
        'batches_done', coalesce(summary->'batches_done', '[]'::jsonb) || %(batch)s::jsonb
    )
WHERE id = %(run)s AND NOT coalesce(summary->'batches_done', '[]'::jsonb) @> %(batch)s::jsonb
"""


def billing_run_add(
    *,
    run_id: int,
    batch: int,
    drafted: list[int],
    finalized: list[int],
    failures: list[dict[str, str]],
) -> bool:
    """Count one batch of a cycle run, inside the batch's transaction; False if counted before."""
    with connection.cursor() as cursor:
        cursor.execute(
            RUN_ADD_SQL,
            {
                "run": run_id,
                "batch": json.dumps([batch]),
                "drafted": len(drafted),
                "finalized": len(finalized),
                "failures": json.dumps(failures),
                "drafts": json.dumps(drafted),
                "finalized_ids": json.dumps(finalized),
            },
        )
        return bool(cursor.rowcount)


def billing_run_complete(*, run: BillingRun, fields: list[str]) -> BillingRun:
    """Close the run with its final counts.

    A run marked abandoned while it was still alive (it took longer than the timeout) keeps
    that outcome, since another run took over its work, but records what it did and when it
    finished; the log says to raise the timeout.
    """
    now = timezone.now()
    values = {name: getattr(run, name) for name in fields}
    if BillingRun.objects.filter(pk=run.pk, outcome=BillingRunOutcome.RUNNING).update(
        outcome=BillingRunOutcome.COMPLETED, finished_at=now, **values
    ):
        run.outcome, run.finished_at = BillingRunOutcome.COMPLETED, now
        return run
    logger.warning(
        "billing run %s finished after it was marked abandoned: BILLING_RUN_TIMEOUT_MINUTES (%s)"
        " is shorter than this run took",
        run.pk,
        settings.BILLING_RUN_TIMEOUT_MINUTES,
    )
    run.summary = {**run.summary, "finished_after_abandoned_at": now.isoformat()}
    values["summary"] = run.summary
    BillingRun.objects.filter(pk=run.pk).update(**values)
    run.refresh_from_db(fields=["outcome", "finished_at", "picked_up_by"])
    return run
