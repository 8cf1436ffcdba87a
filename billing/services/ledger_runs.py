"""Ledger jobs: the backfill of documents issued before the ledger, and the reconciliation run.

The backfill posts each invoice's events (issue, credit notes, payment, void) in the order they
happened, one transaction per invoice under its lock, through the same posting functions as the
live services; every posting is keyed, so a second backfill (or a backfill racing the live
services) posts nothing twice. The reconciliation is logged as a `ledger` billing run, one
failure per mismatch (the metrics read them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from billing.locks import invoice_lock
from billing.models import (
    ISSUED_STATUSES,
    BillingRun,
    BillingRunKind,
    BillingRunOutcome,
    CreditNote,
    Invoice,
    InvoiceStatus,
)
from billing.selectors.ledger import Mismatch, ledger_mismatches
from billing.services.postings import (
    credit_note_post,
    invoice_issued_post,
    invoice_paid_post,
    invoice_voided_post,
)

logger = logging.getLogger(__name__)

ACTOR = "system:ledger-backfill"


@dataclass
class BackfillOutcome:
    """How many invoices the backfill looked at and how many transactions it posted."""

    invoices: int = 0
    posted: int = 0


@transaction.atomic
def _invoice_backfill(invoice_id: int, *, actor: str) -> int:
    """Post one invoice's missing events in the order they happened; how many were posted."""
    invoice = invoice_lock(invoice_id)
    if invoice.issued_at is None:  # never issued (the selection takes issued ones only)
        return 0
    before = invoice.ledger_postings.count()
    events: list[tuple[datetime, int, str | CreditNote]] = [(invoice.issued_at, 0, "issued")]
    for note in invoice.credit_notes.order_by("issued_at", "pk"):
        events.append((note.issued_at, 1, note))
    if invoice.status == InvoiceStatus.PAID and invoice.paid_at is not None:
        events.append((invoice.paid_at, 2, "paid"))
    if invoice.status == InvoiceStatus.VOID and invoice.voided_at is not None:
        events.append((invoice.voided_at, 2, "voided"))
    for _, _, event in sorted(events, key=lambda item: (item[0], item[1])):
        if isinstance(event, CreditNote):
            credit_note_post(note=event, actor=actor)
        elif event == "issued":
            invoice_issued_post(invoice=invoice, actor=actor)
        elif event == "paid":
            invoice_paid_post(invoice=invoice, actor=actor)
        else:
            invoice_voided_post(invoice=invoice, actor=actor)
    return invoice.ledger_postings.count() - before


def ledger_backfill(*, actor: str = ACTOR) -> BackfillOutcome:
    """Post every issued, paid or voided invoice and every credit note not posted yet."""
    outcome = BackfillOutcome()
    invoice_ids = (
        Invoice.objects.filter(Q(status__in=ISSUED_STATUSES) | Q(status=InvoiceStatus.VOID))
        .order_by("issued_at", "pk")
        .values_list("pk", flat=True)
    )
    for invoice_id in invoice_ids:
        outcome.invoices += 1
        outcome.posted += _invoice_backfill(invoice_id, actor=actor)
    logger.info("ledger backfill: %s invoices, %s postings", outcome.invoices, outcome.posted)
    return outcome


def _failure(mismatch: Mismatch) -> dict[str, str]:
    return {
        "stage": "reconcile",
        "code": mismatch.code,
        "subject": mismatch.subject,
        "message": mismatch.message,
    }


def ledger_reconciliation_run(*, now: datetime | None = None) -> BillingRun:
    """Compare the ledger with the documents and log the outcome as a `ledger` billing run."""
    now = now or timezone.now()
    started = timezone.now()
    mismatches = ledger_mismatches()
    failures = [_failure(mismatch) for mismatch in mismatches]
    run = BillingRun.objects.create(
        kind=BillingRunKind.LEDGER,
        outcome=BillingRunOutcome.COMPLETED,  # written once, when it is done
        started_at=started,
        finished_at=timezone.now(),
        as_of=now,
        failures=failures,
        summary={"mismatches": len(failures)},
    )
    if failures:
        logger.error("ledger reconciliation found %d mismatch(es): run %s", len(failures), run.pk)
    return run
