"""Issued documents: invoice status changes, finalization with gapless numbers, payment, void,
credit notes.

A finalized invoice never changes; corrections are credit notes (or void and reissue). Numbers
come from DocumentSequence, locked inside the finalizing transaction, so a rolled-back
finalization gives its number back and numbers stay gapless per issuer, series and year. Every
status change goes through `invoice_transition` (the invoice lifecycle map) and writes one
InvoiceEvent row in the same transaction, and each money event (issue, payment, void, credit
note) posts to the ledger in that transaction too (billing.services.postings).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounts.models import Organization
from billing.locks import document_sequence_lock, invoice_lock
from billing.models import (
    INVOICE_LIFECYCLE,
    ISSUED_STATUSES,
    CreditNote,
    CreditNoteLine,
    Invoice,
    InvoiceEvent,
    InvoiceLine,
    InvoiceStatus,
    NumberSeries,
)
from billing.services.budgets import budgets_evaluate_enqueue
from billing.services.deposits import deposits_settle
from billing.services.drawdown import invoice_balance_draw
from billing.services.invoices import invoice_rate_draft
from billing.services.postings import (
    credit_note_post,
    invoice_issued_post,
    invoice_paid_post,
    invoice_voided_post,
)
from contracts.locks import contract_lock
from contracts.services import json_value
from core.errors import Conflict, SemanticError, ValidationFailed, require_reason
from core.events import emit_to
from core.lifecycle import StatusChange
from core.money import money_amount_check, round_money

logger = logging.getLogger(__name__)

SERIES_PREFIX = {NumberSeries.INVOICE: "INV", NumberSeries.CREDIT_NOTE: "CN"}


def finalize_grace() -> timedelta:
    """How long after a period's end its invoice stays a draft (late usage still counts)."""
    return timedelta(hours=float(settings.BILLING_FINALIZE_GRACE_HOURS))


def _next_number(*, issuer: Organization, series: str, year: int) -> tuple[int, str]:
    """The next gapless number of the issuer's series in the year (locks the sequence row)."""
    sequence = document_sequence_lock(issuer=issuer, series=series, year=year)
    sequence.last_number += 1
    sequence.save(update_fields=["last_number"])
    prefix = SERIES_PREFIX[NumberSeries(series)]
    return sequence.last_number, f"{prefix}-{issuer.slug.upper()}-{year}-{sequence.last_number:06d}"


# ---------------------------------------------------------------- status changes


# Invoice moves other systems hear about (webhooks), by target status.
INVOICE_WEBHOOKS = {InvoiceStatus.FINALIZED: "invoice.issued", InvoiceStatus.PAID: "invoice.paid"}


def _invoice_webhook(invoice: Invoice, change: StatusChange) -> None:
    """The outbox event of an invoice move, for its customer and its issuer."""
    event_type = INVOICE_WEBHOOKS.get(change.to_status)  # type: ignore[call-overload]
    if event_type is None:
        return
    if event_type == "invoice.issued":
        # The issued amount replaces the period's rated one in the customer's budgets.
        budgets_evaluate_enqueue([invoice.customer_id])
    emit_to(
        [invoice.customer_id, invoice.issuer_id],
        type=event_type,
        data={
            "invoice_id": invoice.pk,
            "number": invoice.number,
            "contract_id": invoice.contract_id,
            "status": invoice.status,
            "period_start": invoice.period_start,
            "period_end": invoice.period_end,
            "total": round_money(invoice.total, invoice.currency),
            "currency": invoice.currency,
            "issued_at": invoice.issued_at,
            "due_at": invoice.due_at,
            "paid_at": invoice.paid_at,
        },
        occurred_at=change.at,
    )


def _invoice_event_write(invoice: Invoice, change: StatusChange) -> None:
    """The invoice lifecycle's event writer (and a log line for the operators' logs)."""
    InvoiceEvent.objects.create(
        invoice=invoice,
        from_status=change.from_status,
        to_status=change.to_status,
        effective_at=change.at,
        actor=change.actor,
        explanation=(
            f"Invoice {invoice} went from {change.from_status} to {change.to_status}: "
            f"{change.reason}"
        ),
        inputs={key: json_value(value) for key, value in change.inputs.items()},
    )
    _invoice_webhook(invoice, change)
    logger.info(
        "invoice %s: %s -> %s by %s", invoice.pk, change.from_status, change.to_status, change.actor
    )


def invoice_transition(
    *,
    invoice: Invoice,
    to_status: str,
    actor: str,
    reason: str,
    at: datetime | None = None,
    update_fields: Sequence[str] = (),
    inputs: Mapping[str, Any] | None = None,
) -> Invoice:
    """Move a locked invoice along the lifecycle map (409 invalid_invoice_transition otherwise),
    saving `update_fields` with it and writing its InvoiceEvent; runs in the caller's
    transaction."""
    at = at or timezone.now()
    INVOICE_LIFECYCLE.guard(invoice.status, to_status, label=str(invoice))
    fields = list(update_fields)
    if to_status == InvoiceStatus.PAID:
        invoice.paid_at = at
        fields.append("paid_at")
    INVOICE_LIFECYCLE.advance(
        invoice,
        to=to_status,
        at=at,
        actor=actor,
        reason=reason,
        record=_invoice_event_write,
        update_fields=fields,
        inputs=inputs,
    )
    return invoice


@transaction.atomic
def invoice_finalize(*, invoice: Invoice, actor: str, now: datetime | None = None) -> Invoice:
    """Give a draft its number and due date; from here on it never changes. Rerun: a no-op.

    The draft is re-rated first (usage that arrived within the grace window counts), so the
    caller passes the draft and gets back what was issued.
    """
    now = now or timezone.now()
    # Lock order: the contract, then the invoice. The contract's row lock also orders
    # finalization against usage batches of the same contract (they hold a share lock): a batch
    # committed before this point is on the invoice.
    contract_lock(invoice.contract_id)
    invoice = invoice_lock(invoice)
    if invoice.status in ISSUED_STATUSES or invoice.status == InvoiceStatus.VOID:
        return invoice
    if now < invoice.period_end + finalize_grace():
        raise Conflict(
            "The period's grace window is not over; late usage may still arrive.",
            code="grace_not_over",
            detail={"finalizable_at": (invoice.period_end + finalize_grace()).isoformat()},
        )
    INVOICE_LIFECYCLE.guard(invoice.status, InvoiceStatus.FINALIZED, label=str(invoice))
    invoice_rate_draft(invoice=invoice, now=now)
    return invoice_finalize_rated(invoice=invoice, actor=actor, now=now)


def invoice_finalize_rated(*, invoice: Invoice, actor: str, now: datetime) -> Invoice:
    """Finalize a locked draft that was just rated (decisions recorded): draw from the customer's
    balance, number, move to finalized, post; in the caller's transaction (its contract locked).

    `invoice_finalize` comes here after its re-rating; the billing cycle after the one rating
    it gives each invoice in a run.
    """
    drawn = invoice_balance_draw(invoice=invoice, now=now)
    year = now.year
    invoice.sequence_number, invoice.number = _next_number(
        issuer=invoice.issuer, series=NumberSeries.INVOICE, year=year
    )
    invoice.sequence_year = year
    invoice.issued_at = now
    invoice.due_at = now + timedelta(days=settings.BILLING_PAYMENT_TERMS_DAYS)
    invoice_transition(
        invoice=invoice,
        to_status=InvoiceStatus.FINALIZED,
        actor=actor,
        reason=(
            f"numbered {invoice.number} for {invoice.total} {invoice.currency}, "
            f"due {invoice.due_at:%Y-%m-%d}"
        ),
        at=now,
        update_fields=["sequence_number", "number", "sequence_year", "issued_at", "due_at"],
        inputs={
            "number": invoice.number,
            "total": invoice.total,
            "due_at": invoice.due_at,
            "drawn_from_balance": drawn,
        },
    )
    # The invoice was a draft until now: nothing of its issue can be posted yet.
    invoice_issued_post(invoice=invoice, actor=actor, first_issue=True)
    if drawn and invoice.total == 0:
        # Settled in full from the prepaid balance: there is nothing left to collect.
        invoice_transition(
            invoice=invoice,
            to_status=InvoiceStatus.PAID,
            actor=actor,
            reason=f"settled in full from the prepaid balance ({drawn} {invoice.currency})",
            at=now,
        )
        invoice_paid_post(invoice=invoice, actor=actor)
    return invoice


@transaction.atomic
def invoice_mark_paid(
    *, invoice: Invoice, actor: str, reason: str, at: datetime | None = None
) -> Invoice:
    """Record that an issued invoice was paid (Stripe's webhook, or an operator for a transfer)."""
    invoice = invoice_lock(invoice)
    invoice_transition(
        invoice=invoice, to_status=InvoiceStatus.PAID, actor=actor, reason=reason, at=at
    )
    invoice_paid_post(invoice=invoice, actor=actor)
    deposits_settle(contract_id=invoice.contract_id, at=at or timezone.now())
    return invoice


@transaction.atomic
def invoice_mark_uncollectible(
    *, invoice: Invoice, actor: str, reason: str, at: datetime | None = None
) -> Invoice:
    """Record that an issued invoice will not be paid; it may still be paid or voided later."""
    invoice = invoice_lock(invoice)
    return invoice_transition(
        invoice=invoice,
        to_status=InvoiceStatus.UNCOLLECTIBLE,
        actor=actor,
        reason=reason,
        at=at,
    )


@transaction.atomic
def invoice_void(
    *, invoice: Invoice, reason: str, actor: str, now: datetime | None = None
) -> Invoice:
    """Void an issued invoice; the billing cycle then reissues the period from fresh facts."""
    require_reason(reason, "A reason is required to void an invoice.")
    now = now or timezone.now()
    invoice = invoice_lock(invoice)
    if invoice.credited_total > 0:
        raise Conflict(
            "An invoice with credit notes cannot be voided; issue another credit note instead.",
            code="invoice_has_credit_notes",
        )
    INVOICE_LIFECYCLE.guard(invoice.status, InvoiceStatus.VOID, label=str(invoice))
    invoice.voided_at = now
    invoice.void_reason = f"{reason.strip()} ({actor})"
    invoice_transition(
        invoice=invoice,
        to_status=InvoiceStatus.VOID,
        actor=actor,
        reason=reason.strip(),
        at=now,
        update_fields=["voided_at", "void_reason"],
    )
    invoice_voided_post(invoice=invoice, actor=actor)
    return invoice


@transaction.atomic
def credit_note_issue(
    *,
    invoice: Invoice,
    reason: str,
    actor: str,
    amount: Decimal | None = None,
    line_amounts: Sequence[tuple[InvoiceLine, Decimal]] = (),
    now: datetime | None = None,
) -> CreditNote:
    """Credit part of an issued invoice: a whole amount, or amounts against given lines.

    Taxed like the invoice (tax on the taxable share, rounded once); the credited total can
    never pass the invoice total, checked here under the invoice lock and by a constraint.
    """
    now = now or timezone.now()
    require_reason(reason, "A reason is required for a credit note.")
    if (amount is None) == (not line_amounts):
        raise ValidationFailed(
            "Give either an amount or amounts per line.", code="credit_amount_required"
        )
    invoice = invoice_lock(invoice)
    if invoice.status not in ISSUED_STATUSES:
        raise Conflict(
            f"Only an issued invoice can be credited; this one is {invoice.status}.",
            code="invoice_not_issued",
        )
    parts: list[tuple[InvoiceLine | None, Decimal, str, bool]] = []
    if amount is not None:
        parts.append((None, amount, reason.strip(), True))
    for line, line_amount in line_amounts:
        if line.invoice_id != invoice.pk:
            raise ValidationFailed(
                "A credited line must belong to the invoice.", code="line_not_on_invoice"
            )
        already = line.credits.aggregate(total=Sum("amount"))["total"] or Decimal(0)
        if line_amount > line.amount - already:
            raise SemanticError(
                f"Line {line.position} has {line.amount - already} left to credit.",
                code="credit_exceeds_line",
            )
        parts.append(
            (line, line_amount, f"Credit on line {line.position}: {line.description}", line.taxable)
        )
    for _, part, _, _ in parts:
        money_amount_check(part, invoice.currency, code="invalid_credit_amount", what="A credit")
    subtotal = sum((part for _, part, _, _ in parts), Decimal(0))
    taxable = sum((part for _, part, _, is_taxable in parts if is_taxable), Decimal(0))
    tax = round_money(taxable * invoice.tax_rate_pct / Decimal(100), invoice.currency)
    total = subtotal + tax
    if invoice.credited_total + total > invoice.total:
        raise SemanticError(
            f"Credits would reach {invoice.credited_total + total} {invoice.currency}, more "
            f"than the invoice total {invoice.total}.",
            code="credit_exceeds_invoice",
            detail={"remaining": str(invoice.total - invoice.credited_total)},
        )
    year = now.year
    sequence_number, number = _next_number(
        issuer=invoice.issuer, series=NumberSeries.CREDIT_NOTE, year=year
    )
    note = CreditNote.objects.create(
        invoice=invoice,
        issuer=invoice.issuer,
        customer=invoice.customer,
        number=number,
        sequence_year=year,
        sequence_number=sequence_number,
        reason=reason.strip(),
        currency=invoice.currency,
        subtotal=subtotal,
        tax=tax,
        total=total,
        issued_at=now,
        issued_by=actor,
    )
    CreditNoteLine.objects.bulk_create(
        CreditNoteLine(credit_note=note, invoice_line=line, description=text, amount=part)
        for line, part, text, _ in parts
    )
    invoice.credited_total += total
    invoice.save(update_fields=["credited_total", "updated_at"])
    credit_note_post(note=note, actor=actor)
    budgets_evaluate_enqueue([invoice.customer_id])
    emit_to(
        [invoice.customer_id, invoice.issuer_id],
        type="credit_note.issued",
        data={
            "credit_note_id": note.pk,
            "number": note.number,
            "invoice_id": invoice.pk,
            "invoice_number": invoice.number,
            "reason": note.reason,
            "subtotal": round_money(note.subtotal, note.currency),
            "tax": round_money(note.tax, note.currency),
            "total": round_money(note.total, note.currency),
            "currency": note.currency,
        },
        occurred_at=now,
    )
    return note
