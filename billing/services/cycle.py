"""The billing cycle: draft ended periods, finalize drafts past their grace, hand over for delivery.

Run by Celery beat on the `billing` queue. Each invoice is its own transaction (with the run's
count of it), so a worker killed mid-run leaves whole drafts or whole finalized invoices, counted
on its run; the next run (or a retry) picks up exactly what is left: due periods without an
invoice, drafts whose grace is over, and finalized invoices whose delivery never ran (the broker
was down when they were handed over). Past BILLING_RUN_TIMEOUT_MINUTES the killed run is marked
abandoned and the run that took over says so (billing/services/runs.py).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from celery import current_app
from django.db import transaction
from django.db.models import BigIntegerField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone

from billing.locks import invoice_lock
from billing.models import BillingRun, BillingRunKind, BillingRunOutcome, Invoice, InvoiceStatus
from billing.selectors import due_periods
from billing.services.documents import finalize_grace, invoice_finalize
from billing.services.invoices import ACTOR, invoice_generate
from billing.services.runs import billing_run_complete, billing_run_open, billing_run_record
from contracts.locks import contract_lock
from core.errors import ApplicationError

logger = logging.getLogger(__name__)

# A finalized invoice that no delivery run has finished this long after its issue was never
# handed over (the broker was down when its finalization committed) or lost its worker; the
# cycle hands it over again. Long enough that a delivery still waiting in a busy queue is
# rarely sent twice (and a second delivery finds every step done).
HANDOVER_TIMEOUT = timedelta(hours=1)


def _failure(stage: str, subject: str, exc: ApplicationError) -> dict[str, str]:
    logger.warning("billing %s failed for %s: %s", stage, subject, exc)
    return {"stage": stage, "subject": subject, "code": exc.code, "message": str(exc)}


def _enqueue_delivery(invoice_id: int) -> None:
    """Deliver after commit, by task name (tasks import services, not the other way round).

    The invoice is committed by then: a broker that cannot take the task is logged, not
    raised, so the run goes on; a later run hands the invoice over again (_lost_handovers).
    """
    # A lambda, not functools.partial: Django names the failed callback by its __qualname__.
    transaction.on_commit(
        lambda: current_app.send_task("billing.deliver_invoice", args=[invoice_id]), robust=True
    )


def _lost_handovers(*, now: datetime, exclude: list[int]) -> list[int]:
    """Finalized invoices issued HANDOVER_TIMEOUT before `now` that no delivery run completed.

    An abandoned delivery run has a `finished_at` too, but never delivered anything.
    """
    delivered = (
        BillingRun.objects.filter(
            kind=BillingRunKind.DELIVERY,
            outcome=BillingRunOutcome.COMPLETED,
            summary__has_key="invoice_id",
        )
        .annotate(invoice_id=Cast(KT("summary__invoice_id"), BigIntegerField()))
        .values("invoice_id")
    )
    return list(
        Invoice.objects.filter(
            status=InvoiceStatus.FINALIZED, issued_at__lte=now - HANDOVER_TIMEOUT
        )
        .exclude(pk__in=exclude)
        .exclude(pk__in=delivered)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


@transaction.atomic
def invoice_issue(
    *, invoice: Invoice, actor: str, now: datetime | None = None, deliver: bool = True
) -> Invoice | None:
    """Finalize a draft and queue its delivery; None when it is no longer a draft.

    The cycle and the admin's finalize action both come here, so a finalized invoice is
    always delivered, and a run that finds another run's work does not claim it.
    """
    # Lock order: the contract, then the invoice (as invoice_finalize takes them).
    contract_lock(invoice.contract_id)
    if invoice_lock(invoice).status != InvoiceStatus.DRAFT:
        return None
    issued = invoice_finalize(invoice=invoice, actor=actor, now=now)
    if deliver:
        _enqueue_delivery(issued.pk)
    return issued


def _picked_up(
    *, taken: list[BillingRun], drafted: list[Invoice], finalized: list[Invoice]
) -> list[int]:
    """This run's invoices that the abandoned runs it took over had been due to make or issue.

    An abandoned run billed as of its `as_of`: the periods that had ended by then were its to
    draft, and those whose grace was over its to finalize.
    """
    if not taken:
        return []
    as_of = max(old.as_of for old in taken)
    due = {invoice.pk for invoice in drafted if invoice.period_end <= as_of}
    due |= {invoice.pk for invoice in finalized if invoice.period_end <= as_of - finalize_grace()}
    return sorted(due)


def billing_cycle_run(*, now: datetime | None = None, deliver: bool = True) -> BillingRun:
    """Draft the invoices of ended periods and finalize the drafts whose grace is over.

    The run's counts and invoice ids are written in each invoice's transaction, so a run whose
    worker dies says exactly what it committed; the run after the timeout takes over the rest
    (billing/services/runs.py) and names what it picked up.
    """
    now = now or timezone.now()
    run, taken = billing_run_open(kind=BillingRunKind.CYCLE, as_of=now)
    run.summary = {**run.summary, "drafts": [], "finalized": []}
    failures: list[dict[str, str]] = []
    drafted: list[Invoice] = []
    finalized: list[Invoice] = []

    def record(invoice_list: list[Invoice], invoice: Invoice) -> None:
        """Count the invoice on the run's row, in the invoice's transaction."""
        invoice_list.append(invoice)
        run.drafts_created, run.finalized = len(drafted), len(finalized)
        run.summary = {
            **run.summary,
            "drafts": [item.pk for item in drafted],
            "finalized": [item.pk for item in finalized],
        }
        billing_run_record(run=run, fields=["drafts_created", "finalized", "summary"])

    def fail(failure: dict[str, str]) -> None:
        failures.append(failure)
        run.failures = failures
        billing_run_record(run=run, fields=["failures"])

    for contract, period in due_periods(now=now):
        try:
            with transaction.atomic():
                invoice, created = invoice_generate(
                    contract=contract, period_start=period.start, now=now
                )
                if created:
                    record(drafted, invoice)
        except ApplicationError as exc:
            fail(_failure("draft", f"{contract.number} {period.start:%Y-%m-%d}", exc))
    ready = Invoice.objects.filter(
        status=InvoiceStatus.DRAFT, period_end__lte=now - finalize_grace()
    ).order_by("period_end", "pk")
    for invoice in ready:
        try:
            with transaction.atomic():
                issued = invoice_issue(invoice=invoice, actor=ACTOR, now=now, deliver=deliver)
                if issued is not None:
                    record(finalized, issued)
        except ApplicationError as exc:
            fail(_failure("finalize", f"invoice {invoice.pk}", exc))
    finalized_ids = [invoice.pk for invoice in finalized]
    handed_over_again = _lost_handovers(now=now, exclude=finalized_ids) if deliver else []
    for invoice_id in handed_over_again:
        logger.warning("invoice %s was never delivered; handing it over again", invoice_id)
        _enqueue_delivery(invoice_id)
    if handed_over_again:
        run.summary["handed_over_again"] = handed_over_again
    picked_up = _picked_up(taken=taken, drafted=drafted, finalized=finalized)
    run.picked_up = len(picked_up)
    if taken:
        run.summary["picked_up"] = picked_up
    billing_run_complete(run=run, fields=["picked_up", "summary"])
    logger.info(
        "billing cycle as of %s: %s drafts, %s finalized, %s failures, %s picked up from runs %s",
        now.isoformat(),
        len(drafted),
        len(finalized),
        len(failures),
        len(picked_up),
        [old.pk for old in taken],
    )
    return run
