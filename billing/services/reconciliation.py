"""The usage reconciliation run: accepted usage against issued invoices, logged as a billing run."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from billing.models import BillingRun, BillingRunKind, BillingRunOutcome
from billing.selectors.reconciliation import UsageReconciliation, usage_reconciliation
from core.text import counted

logger = logging.getLogger(__name__)


def _failures(result: UsageReconciliation) -> list[dict[str, object]]:
    """One failure entry per defect, in the shape the other billing runs use."""
    failures: list[dict[str, object]] = []
    for period in result.mismatches:
        failures.append(
            {
                "stage": "reconcile",
                "code": "usage_mismatch",
                "subject": f"{period.contract_number} {period.period_start:%Y-%m-%d}",
                "message": (
                    f"Invoice {period.invoice_number} carries {period.invoiced_input_tokens:,}"
                    f" input and {period.invoiced_output_tokens:,} output tokens; the usage"
                    f" that belongs to the period is {period.accepted_input_tokens:,} and"
                    f" {period.accepted_output_tokens:,}."
                ),
            }
        )
    for code, counts, what in (
        ("usage_unassigned", result.unassigned_events, "belong to no billing period"),
        ("usage_counted_twice", result.overlapping_events, "belong to more than one period"),
    ):
        for contract_id, events in sorted(counts.items()):
            failures.append(
                {
                    "stage": "reconcile",
                    "code": code,
                    "subject": f"contract {contract_id}",
                    "message": (
                        f"{counted(events, 'accepted usage event', shown=f'{events:,}')} {what}."
                    ),
                }
            )
    return failures


def usage_reconciliation_run(
    *, now: datetime | None = None, contract_ids: list[int] | None = None
) -> tuple[BillingRun, UsageReconciliation]:
    """Reconcile usage with issued invoices and log the outcome as a `reconciliation` run."""
    now = now or timezone.now()
    started = timezone.now()
    result = usage_reconciliation(contract_ids=contract_ids)
    failures = _failures(result)
    statuses = [period.status for period in result.periods]
    with transaction.atomic():
        run = BillingRun.objects.create(
            kind=BillingRunKind.RECONCILIATION,
            outcome=BillingRunOutcome.COMPLETED,  # written once, when it is done
            started_at=started,
            finished_at=timezone.now(),
            as_of=now,
            failures=failures,
            summary={
                "contracts": len({period.contract_id for period in result.periods}),
                "periods": len(statuses),
                "ok": statuses.count("ok"),
                "open": statuses.count("open"),
                "mismatches": statuses.count("mismatch"),
                "unassigned_events": sum(result.unassigned_events.values()),
                "overlapping_events": sum(result.overlapping_events.values()),
            },
        )
    if failures:
        logger.error("usage reconciliation found %d defect(s): run %s", len(failures), run.pk)
    return run, result
