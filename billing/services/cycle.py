"""The billing cycle: draft ended periods, finalize drafts past their grace, hand over for delivery.

Run by Celery beat on the `billing` queue. Each invoice is its own transaction, so a worker
killed mid-run leaves whole drafts or whole finalized invoices; the next run (or a retry) picks
up exactly what is left: due periods without an invoice, drafts whose grace is over, and
finalized invoices whose delivery never ran (the broker was down when they were handed over).
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
from billing.models import BillingRun, BillingRunKind, Invoice, InvoiceStatus
from billing.selectors import due_periods
from billing.services.documents import finalize_grace, invoice_finalize
from billing.services.invoices import ACTOR, invoice_generate
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
    """Finalized invoices issued HANDOVER_TIMEOUT before `now` that no delivery run finished."""
    delivered = (
        BillingRun.objects.filter(
            kind=BillingRunKind.DELIVERY, finished_at__isnull=False, summary__has_key="invoice_id"
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


def billing_cycle_run(*, now: datetime | None = None, deliver: bool = True) -> BillingRun:
    """Draft the invoices of ended periods and finalize the drafts whose grace is over."""
    now = now or timezone.now()
    run = BillingRun.objects.create(kind=BillingRunKind.CYCLE, started_at=timezone.now(), as_of=now)
    failures: list[dict[str, str]] = []
    created_ids: list[int] = []
    for contract, period in due_periods(now=now):
        try:
            invoice, created = invoice_generate(
                contract=contract, period_start=period.start, now=now
            )
        except ApplicationError as exc:
            failures.append(_failure("draft", f"{contract.number} {period.start:%Y-%m-%d}", exc))
            continue
        if created:
            created_ids.append(invoice.pk)
    finalized_ids: list[int] = []
    ready = Invoice.objects.filter(
        status=InvoiceStatus.DRAFT, period_end__lte=now - finalize_grace()
    ).order_by("period_end", "pk")
    for invoice in ready:
        try:
            issued = invoice_issue(invoice=invoice, actor=ACTOR, now=now, deliver=deliver)
        except ApplicationError as exc:
            failures.append(_failure("finalize", f"invoice {invoice.pk}", exc))
            continue
        if issued is not None:
            finalized_ids.append(issued.pk)
    handed_over_again = _lost_handovers(now=now, exclude=finalized_ids) if deliver else []
    for invoice_id in handed_over_again:
        logger.warning("invoice %s was never delivered; handing it over again", invoice_id)
        _enqueue_delivery(invoice_id)
    run.drafts_created = len(created_ids)
    run.finalized = len(finalized_ids)
    run.failures = failures
    run.summary = {"drafts": created_ids, "finalized": finalized_ids}
    if handed_over_again:
        run.summary["handed_over_again"] = handed_over_again
    run.finished_at = timezone.now()
    run.save()
    logger.info(
        "billing cycle as of %s: %s drafts, %s finalized, %s failures",
        now.isoformat(),
        len(created_ids),
        len(finalized_ids),
        len(failures),
    )
    return run
