"""Invoice delivery: store the PDF, e-mail the customer's billing contacts, push to Stripe.

Each step leaves a mark on the invoice (pdf, emailed_at, stripe_invoice_id) and is skipped when
the mark is there, so a delivery rerun after a crash continues where the last one stopped.
Every run of the pipeline writes a BillingRun(kind="delivery") row with what it did and why it
stopped.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.mail import EmailMultiAlternatives
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone

from billing.locks import invoice_lock
from billing.models import (
    BillingRunKind,
    CreditNote,
    Invoice,
    InvoiceStatus,
)
from billing.parties import document_party
from billing.rendering import (
    credit_note_document,
    credit_note_html,
    credit_note_pdf,
    format_amount,
    invoice_html,
    invoice_pdf,
    invoice_text,
)
from billing.services.documents import invoice_transition
from billing.services.runs import billing_run_complete, billing_run_open, billing_run_record
from billing.services.stripe import stripe_enabled, stripe_invoice_push
from core.errors import ApplicationError, Conflict, SemanticError

logger = logging.getLogger(__name__)

DELIVERY_ACTOR = "system:delivery"
# Domain errors with this status are transient (Stripe unreachable): re-raised for a retry.
RETRYABLE_STATUS = 503


def _require_issued(invoice: Invoice, *, allow_void: bool) -> None:
    """Conflict unless the invoice carries a number (and, for sending, is not void)."""
    if invoice.status == InvoiceStatus.DRAFT:
        raise Conflict(
            f"Invoice {invoice} is a draft; only issued invoices are delivered.",
            code="invoice_not_issued",
        )
    if invoice.status == InvoiceStatus.VOID and not allow_void:
        raise Conflict(f"Invoice {invoice} is void; it is not sent.", code="invoice_void")


def billing_contacts(invoice: Invoice) -> list[str]:
    """The customer's valid billing addresses, deduplicated: its billing profile's e-mail first,
    then the organization's list in the order given."""
    contacts: list[str] = []
    for raw in document_party(invoice.customer)["billing_emails"]:
        address = str(raw).strip()
        try:
            validate_email(address)
        except ValidationError:
            logger.warning("invoice %s: skipping invalid billing e-mail %r", invoice.pk, raw)
            continue
        if address.lower() not in {known.lower() for known in contacts}:
            contacts.append(address)
    return contacts


def _pdf_stem(invoice: Invoice) -> str:
    """The stored PDF's name carries the status it prints: "CH-INV-2026-000001-sent"."""
    return f"{invoice.number}-{invoice.status}"


def invoice_pdf_present(invoice: Invoice) -> bool:
    """Whether the stored PDF is set, still on the storage, and prints the current status.

    A PDF stored while the invoice was finalized says "Finalized"; once it is sent, paid or
    voided the next download renders a new one, so the PDF says what the API and admin say.
    """
    name = str(invoice.pdf.name or "")
    if not name or not PurePosixPath(name).stem.startswith(_pdf_stem(invoice)):
        return False
    return bool(invoice.pdf.storage.exists(name))


def invoice_pdf_store(*, invoice: Invoice) -> Invoice:
    """Render and store the invoice's PDF once per status; a rerun with it present is a no-op."""
    with transaction.atomic():
        invoice = invoice_lock(invoice)
        _require_issued(invoice, allow_void=True)
        if invoice_pdf_present(invoice):
            return invoice
        # A file written here and then rolled back is an orphan, never a wrong document: the
        # rerun writes a fresh file and the invoice points at that one.
        invoice.pdf.save(f"{_pdf_stem(invoice)}.pdf", ContentFile(invoice_pdf(invoice)), save=False)
        invoice.save(update_fields=["pdf", "updated_at"])
        logger.info("invoice %s: stored PDF %s", invoice.pk, invoice.pdf.name)
    return invoice


def _attachment(invoice: Invoice) -> bytes:
    """The stored PDF's bytes (the document of record, not a fresh rendering)."""
    with invoice.pdf.open("rb") as stored:
        return stored.read()


def invoice_email(
    *,
    invoice: Invoice,
    now: datetime | None = None,
    resend: bool = False,
    actor: str = DELIVERY_ACTOR,
) -> Invoice:
    """E-mail the invoice (HTML, text, PDF) to the billing contacts; a finalized one becomes sent.

    Already e-mailed: a no-op unless resend. No billing contacts: SemanticError
    "no_billing_contacts" and nothing changes.
    """
    now = now or timezone.now()
    _require_issued(invoice, allow_void=False)
    if invoice.emailed_at and not resend:
        return invoice
    recipients = billing_contacts(invoice)
    if not recipients:
        raise SemanticError(
            f"{invoice.customer} has no billing e-mail addresses.",
            code="no_billing_contacts",
            detail={"customer_id": invoice.customer_id, "invoice_id": invoice.pk},
        )
    invoice = invoice_pdf_store(invoice=invoice)
    with transaction.atomic():
        # Sending under the row lock means two workers never both send the first e-mail; if
        # the commit fails after sending, the rerun sends again (at least once, never lost).
        invoice = invoice_lock(invoice)
        _require_issued(invoice, allow_void=False)
        if invoice.emailed_at and not resend:
            return invoice
        message = EmailMultiAlternatives(
            subject=(
                f"Invoice {invoice.number} from {invoice.issuer.name}: "
                f"{format_amount(invoice.total, invoice.currency)}"
            ),
            body=invoice_text(invoice),
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=recipients,
        )
        message.attach_alternative(invoice_html(invoice), "text/html")
        message.attach(f"{invoice.number}.pdf", _attachment(invoice), "application/pdf")
        message.send()
        invoice.emailed_at = now
        invoice.emailed_to = recipients
        invoice.save(update_fields=["emailed_at", "emailed_to", "updated_at"])
        if invoice.status == InvoiceStatus.FINALIZED:
            invoice_transition(
                invoice=invoice,
                to_status=InvoiceStatus.SENT,
                actor=actor,
                reason=f"e-mailed to {', '.join(recipients)}",
                at=now,
                inputs={"recipients": recipients},
            )
        logger.info("invoice %s e-mailed to %s by %s", invoice.pk, recipients, actor)
    return invoice


def credit_note_email(*, note: CreditNote) -> CreditNote:
    """E-mail a credit note (HTML, text, PDF) to the customer's billing contacts.

    Credit notes have no delivery marks, so every call sends; the admin and the credit-note
    flow call it once per note.
    """
    recipients = billing_contacts(note.invoice)
    if not recipients:
        raise SemanticError(
            f"{note.customer} has no billing e-mail addresses.",
            code="no_billing_contacts",
            detail={"customer_id": note.customer_id, "credit_note_id": note.pk},
        )
    message = EmailMultiAlternatives(
        subject=(
            f"Credit note {note.number} from {note.issuer.name}: "
            f"{format_amount(note.total, note.currency)}"
        ),
        body=render_to_string("billing/credit_note_email.txt", {"doc": credit_note_document(note)}),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=recipients,
    )
    message.attach_alternative(credit_note_html(note), "text/html")
    message.attach(f"{note.number}.pdf", credit_note_pdf(note), "application/pdf")
    message.send()
    logger.info("credit note %s e-mailed to %s", note.pk, recipients)
    return note


def _stripe_step(invoice: Invoice, *, now: datetime) -> str:
    """Push the invoice to Stripe once, when Stripe is configured; returns what happened."""
    # stripe_pushed_at, not stripe_invoice_id, marks the end: the push stores the id as soon as
    # the Stripe invoice exists and resumes a half-done push itself.
    if invoice.stripe_pushed_at is not None:
        return "already_pushed"
    if not stripe_enabled():
        return "disabled"
    stripe_id = stripe_invoice_push(invoice=invoice)
    # The push service records both itself; fill them only if it did not.
    Invoice.objects.filter(pk=invoice.pk, stripe_pushed_at__isnull=True).update(
        stripe_invoice_id=stripe_id, stripe_pushed_at=now, updated_at=timezone.now()
    )
    return "pushed"


def invoice_deliver(
    *,
    invoice_id: int,
    now: datetime | None = None,
    resend: bool = False,
    actor: str = DELIVERY_ACTOR,
) -> dict[str, Any]:
    """The delivery pipeline: PDF stored, then e-mailed, then pushed to Stripe when enabled.

    Each step is skipped when done, so a rerun continues after a crash. A domain error (no
    billing contacts, a void invoice, Stripe refusing the invoice) is written to the run's
    failures and returned. Anything else, and a retryable domain error (503, e.g. Stripe
    unreachable), is written there too and re-raised, so the task can retry.
    """
    now = now or timezone.now()
    # Takes over the invoice's delivery runs that were left open past the timeout.
    run, taken = billing_run_open(
        kind=BillingRunKind.DELIVERY, as_of=now, summary={"invoice_id": invoice_id}
    )
    run.picked_up = 1 if taken else 0
    steps: dict[str, str] = {}
    step = "load"

    def progress(name: str, outcome: str) -> None:
        """Note a finished step on the run's row at once (a killed run still shows it)."""
        steps[name] = outcome
        run.summary = {**run.summary, "steps": steps}
        billing_run_record(run=run, fields=["summary"])

    def finish(failure: dict[str, Any] | None = None) -> dict[str, Any]:
        """Close the run row (with the failure, if any) and return the caller's summary."""
        if failure is not None:
            run.failures = [*run.failures, {"invoice_id": invoice_id, "step": step, **failure}]
        run.summary = {**run.summary, "steps": steps}
        billing_run_complete(run=run, fields=["failures", "summary", "delivered", "picked_up"])
        return {
            "run_id": run.pk,
            "invoice_id": invoice_id,
            "steps": steps,
            "failures": run.failures,
        }

    try:
        invoice = Invoice.objects.select_related("customer", "issuer").get(pk=invoice_id)
        run.summary["number"] = invoice.number
        step = "pdf"
        present = invoice_pdf_present(invoice)
        invoice = invoice_pdf_store(invoice=invoice)
        progress("pdf", "present" if present else "stored")
        step = "email"
        if invoice.emailed_at and not resend:
            progress("email", "already_sent")
        else:
            invoice = invoice_email(invoice=invoice, now=now, resend=resend, actor=actor)
            progress("email", "sent")
        step = "stripe"
        progress("stripe", _stripe_step(invoice, now=now))
    except ApplicationError as error:
        logger.warning("delivery of invoice %s stopped at %s: %s", invoice_id, step, error.code)
        result = finish({"code": error.code, "message": error.message})
        if error.status_code == RETRYABLE_STATUS:
            raise
        return result
    except Exception as error:
        logger.exception("delivery of invoice %s failed at %s", invoice_id, step)
        finish({"code": "unexpected_error", "message": f"{type(error).__name__}: {error}"})
        raise
    run.delivered = 1
    return finish()
