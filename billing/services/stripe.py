"""Stripe: issued invoices pushed as one-off Stripe invoices, and Stripe's webhooks applied back.

Our invoice is the document of record; Stripe only collects it. Every Stripe write carries an
idempotency key derived from our primary keys, and the Stripe invoice id is stored as soon as
it exists, so a push that crashed anywhere can simply be run again: it finds or replays what
was already made and never makes a second invoice or line. Stripe keeps idempotency keys for
24 hours; a resumed push also skips lines already on the Stripe draft (by their metadata), so
only a crash between creating the Stripe invoice and storing its id, resumed more than a day
later, could make a second (draft) invoice.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import stripe
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError as PydanticValidationError

from accounts.models import Organization
from billing.locks import invoice_lock
from billing.models import (
    ISSUED_STATUSES,
    Invoice,
    InvoiceStatus,
    StripeCustomer,
    StripeEvent,
)
from billing.schemas import StripeEventIn, StripeInvoiceIn
from billing.services.documents import invoice_mark_paid, invoice_mark_uncollectible
from core.errors import ApplicationError, Conflict, ValidationFailed
from core.money import minor_unit, round_money

logger = logging.getLogger(__name__)

# Retries inside one call are cheap; longer outages are the Celery task's backoff's job.
MAX_NETWORK_RETRIES = 2
HTTP_TIMEOUT_SECONDS = 30
ACTOR = "stripe"


class StripeUnavailable(ApplicationError):
    """Stripe could not be reached or answered with a server error; retry later (503)."""

    code = "stripe_unavailable"
    status_code = 503
    default_message = "Stripe is not reachable right now; try again later."


class StripeRejected(ApplicationError):
    """Stripe refused a request: retrying the same request will not help (502)."""

    code = "stripe_rejected"
    status_code = 502
    default_message = "Stripe refused the request."


def stripe_enabled() -> bool:
    """Whether the Stripe integration is configured (it is off without an API key)."""
    return bool(settings.STRIPE_API_KEY)


def stripe_client() -> stripe.StripeClient:
    """A client built from the current settings (no global stripe.api_key state)."""
    if not stripe_enabled():
        raise Conflict("Stripe is not configured.", code="stripe_not_configured")
    base = settings.STRIPE_API_BASE
    return stripe.StripeClient(
        settings.STRIPE_API_KEY,
        base_addresses={"api": base} if base else None,
        max_network_retries=MAX_NETWORK_RETRIES,
        http_client=stripe.new_default_http_client(timeout=HTTP_TIMEOUT_SECONDS),
    )


def _domain_error(exc: stripe.StripeError) -> ApplicationError:
    """Sort a Stripe error into retryable (unavailable) or not (rejected)."""
    status = exc.http_status or 0
    detail = {"stripe_error": type(exc).__name__, "http_status": status}
    if isinstance(exc, stripe.APIConnectionError | stripe.RateLimitError) or status >= 500:
        return StripeUnavailable(detail=detail)
    return StripeRejected(f"Stripe refused the request: {exc.user_message}", detail=detail)


def _minor(amount: Decimal, currency: str) -> int:
    """An amount in the currency's minor units (cents), rounded half-up."""
    return int(round_money(amount, currency).scaleb(minor_unit(currency)))


def stripe_customer_ensure(*, organization: Organization) -> str:
    """The organization's Stripe customer id; created once (idempotently) and remembered."""
    known = StripeCustomer.objects.filter(organization=organization).first()
    if known is not None:
        return known.stripe_id
    params: dict[str, Any] = {
        "name": organization.name,
        "metadata": {"cardhour_organization_id": str(organization.pk)},
    }
    if organization.billing_emails:
        params["email"] = organization.billing_emails[0]
    try:
        created = stripe_client().v1.customers.create(
            params,  # type: ignore[arg-type]
            {"idempotency_key": f"cardhour-customer-{organization.pk}"},
        )
    except stripe.StripeError as exc:
        raise _domain_error(exc) from exc
    # A concurrent push for the same organization got the same customer (same key).
    row, _ = StripeCustomer.objects.get_or_create(
        organization=organization, defaults={"stripe_id": created.id}
    )
    return row.stripe_id


def _stripe_lines(invoice: Invoice) -> list[tuple[str, str, int, dict[str, str]]]:
    """(idempotency suffix, description, minor amount, metadata) per line, then the tax.

    Line amounts are rounded cumulatively, so the Stripe lines add up to the rounded subtotal
    even if a line carries sub-cent digits.
    """
    currency = invoice.currency
    items: list[tuple[str, str, int, dict[str, str]]] = []
    running, sent = Decimal(0), 0
    for line in invoice.lines.order_by("position"):
        running += line.amount
        amount = _minor(running, currency) - sent
        sent += amount
        metadata = {
            "cardhour_invoice_id": str(invoice.pk),
            "cardhour_invoice_line_id": str(line.pk),
        }
        items.append((f"line-{line.pk}", line.description, amount, metadata))
    if invoice.tax != 0:
        metadata = {"cardhour_invoice_id": str(invoice.pk), "cardhour_invoice_line_id": "tax"}
        description = f"Tax ({invoice.tax_rate_pct.normalize()} %)"
        items.append(("tax", description, _minor(invoice.tax, currency), metadata))
    return items


def stripe_invoice_push(*, invoice: Invoice) -> str:
    """Push an issued invoice to Stripe as a one-off invoice, finalize and send it.

    A rerun after success returns the stored id; a rerun after a crash resumes where it
    stopped (see the module docstring). Network trouble raises StripeUnavailable.
    """
    invoice.refresh_from_db()  # the stored state decides, not a stale copy
    if invoice.status not in ISSUED_STATUSES:
        raise Conflict(
            f"Only an issued invoice goes to Stripe; this one is {invoice.status}.",
            code="invoice_not_issued",
        )
    if invoice.stripe_pushed_at is not None:
        return invoice.stripe_invoice_id
    assert invoice.number and invoice.issued_at and invoice.due_at  # issued invoices have them
    client = stripe_client()
    customer_id = stripe_customer_ensure(organization=invoice.customer)
    key = f"cardhour-invoice-{invoice.pk}"
    resuming = bool(invoice.stripe_invoice_id)
    try:
        if not resuming:
            # Relative to the issue date, so a retry sends the same parameters as the first try.
            days_until_due = max(0, (invoice.due_at - invoice.issued_at).days)
            created = client.v1.invoices.create(
                {
                    "customer": customer_id,
                    "collection_method": "send_invoice",
                    "days_until_due": days_until_due,
                    "auto_advance": False,
                    "currency": invoice.currency.lower(),
                    "description": f"Cardhour invoice {invoice.number}",
                    "pending_invoice_items_behavior": "exclude",
                    "metadata": {
                        "cardhour_invoice_id": str(invoice.pk),
                        "cardhour_invoice_number": invoice.number,
                    },
                },
                {"idempotency_key": key},
            )
            # Its own short transaction: a crash after this point resumes on this invoice.
            with transaction.atomic():
                invoice.stripe_invoice_id = created.id
                invoice.save(update_fields=["stripe_invoice_id", "updated_at"])
        stripe_id = invoice.stripe_invoice_id
        remote = client.v1.invoices.retrieve(stripe_id)
        if remote.status == "draft":
            present: set[str] = set()
            if resuming:
                present = {
                    (line.metadata.to_dict() if line.metadata else {}).get(
                        "cardhour_invoice_line_id", ""
                    )
                    for line in client.v1.invoices.line_items.list(
                        stripe_id, {"limit": 100}
                    ).auto_paging_iter()
                }
            for suffix, description, amount, metadata in _stripe_lines(invoice):
                if metadata["cardhour_invoice_line_id"] in present:
                    continue
                client.v1.invoice_items.create(
                    {
                        "customer": customer_id,
                        "invoice": stripe_id,
                        "amount": amount,
                        "currency": invoice.currency.lower(),
                        "description": description,
                        "metadata": metadata,
                    },
                    {"idempotency_key": f"{key}-{suffix}"},
                )
            remote = client.v1.invoices.finalize_invoice(
                stripe_id, {"auto_advance": False}, {"idempotency_key": f"{key}-finalize"}
            )
        if remote.status == "open":
            client.v1.invoices.send_invoice(stripe_id, options={"idempotency_key": f"{key}-send"})
    except stripe.StripeError as exc:
        raise _domain_error(exc) from exc
    invoice.stripe_pushed_at = timezone.now()
    invoice.save(update_fields=["stripe_pushed_at", "updated_at"])
    logger.info("invoice %s pushed to Stripe as %s", invoice.pk, stripe_id)
    return stripe_id


# ---------------------------------------------------------------- webhooks


@dataclass(frozen=True)
class WebhookReceipt:
    """The recorded event, and whether it had been received before (then nothing changed)."""

    event: StripeEvent
    replay: bool


def _invoice_of(stripe_invoice: dict[str, Any]) -> Invoice | None:
    """Our invoice behind a Stripe invoice object: by its metadata, else by the stored id."""
    stripe_id = str(stripe_invoice.get("id") or "")
    ours = str((stripe_invoice.get("metadata") or {}).get("cardhour_invoice_id") or "")
    invoice = None
    if ours.isdigit():
        invoice = Invoice.objects.filter(pk=int(ours)).first()
    elif stripe_id:
        invoice = Invoice.objects.filter(stripe_invoice_id=stripe_id).first()
    # Metadata naming an invoice that was pushed as another Stripe invoice is not ours.
    if invoice is not None and invoice.stripe_invoice_id not in ("", stripe_id):
        return None
    return invoice


def _event_time(
    event: dict[str, Any], stripe_invoice: dict[str, Any], transition: str | None = None
) -> datetime:
    """When Stripe says the transition happened (else when the event was created)."""
    transitions = stripe_invoice.get("status_transitions") or {}
    at = (transitions.get(transition) if transition else None) or event.get("created")
    return datetime.fromtimestamp(int(at), tz=UTC) if at else timezone.now()


def _apply(event: dict[str, Any], invoice: Invoice) -> str:
    """Apply one invoice event to our locked invoice; returns what happened, for the record."""
    kind = event["type"]
    stripe_invoice = event["data"]["object"]
    try:
        if kind == "invoice.paid":
            if invoice.status == InvoiceStatus.PAID:
                return "already paid"
            at = _event_time(event, stripe_invoice, "paid_at")
            invoice_mark_paid(
                invoice=invoice,
                actor=ACTOR,
                reason=f"Stripe reported the payment (event {event['id']})",
                at=at,
            )
            return "marked paid"
        if kind == "invoice.payment_failed":
            if invoice.status == InvoiceStatus.PAID:
                return "ignored: already paid"
            invoice.payment_failed_at = _event_time(event, stripe_invoice)
            invoice.save(update_fields=["payment_failed_at", "updated_at"])
            return "payment failure noted"
        if kind == "invoice.marked_uncollectible":
            if invoice.status == InvoiceStatus.UNCOLLECTIBLE:
                return "already uncollectible"
            invoice_mark_uncollectible(
                invoice=invoice,
                actor=ACTOR,
                reason=f"Stripe marked it uncollectible (event {event['id']})",
                at=_event_time(event, stripe_invoice, "marked_uncollectible_at"),
            )
            return "marked uncollectible"
    except Conflict as exc:
        # Out-of-order or stale events (paid after void) are recorded, not retried forever.
        return f"ignored: {exc.message}"[:200]
    return f"ignored: unhandled event type {kind}"[:200]


HANDLED_TYPES = frozenset(
    {"invoice.paid", "invoice.payment_failed", "invoice.marked_uncollectible"}
)


def _webhook_verify(*, payload: bytes, signature: str) -> None:
    """Check the Stripe-Signature header: our secret, and signed within the tolerance.

    The SDK refuses a timestamp older than its tolerance but accepts any in the future, so a
    body signed with a clock far ahead (or a leaked secret) would stay valid indefinitely; we
    refuse both directions.
    """
    tolerance = stripe.Webhook.DEFAULT_TOLERANCE
    try:
        stripe.WebhookSignature.verify_header(
            payload, signature, settings.STRIPE_WEBHOOK_SECRET, tolerance
        )
    except stripe.SignatureVerificationError as exc:
        raise ValidationFailed(
            "The Stripe-Signature header does not verify.", code="invalid_signature"
        ) from exc
    except ValueError as exc:  # signed, but not UTF-8 text
        raise ValidationFailed("The body is not a Stripe event.", code="invalid_payload") from exc
    # verify_header succeeded, so the header has a numeric `t` (the first one is the signed one).
    signed_at = next(
        int(value)
        for key, _, value in (part.partition("=") for part in signature.split(","))
        if key == "t"
    )
    if signed_at > time.time() + tolerance:
        raise ValidationFailed(
            "The Stripe-Signature header is dated in the future.", code="invalid_signature"
        )


def _webhook_event(payload: bytes) -> dict[str, Any]:
    """The event, once the fields the webhook reads have the shapes it expects; else a 400."""
    try:
        envelope = StripeEventIn.model_validate_json(payload)
        if envelope.type in HANDLED_TYPES and envelope.data is not None:
            StripeInvoiceIn.model_validate(envelope.data.object)
    except PydanticValidationError as exc:
        errors = [
            {"field": ".".join(str(part) for part in item["loc"]), "message": item["msg"]}
            for item in exc.errors(include_url=False, include_input=False)[:20]
        ]
        raise ValidationFailed(
            "The body is not a Stripe event.", code="invalid_payload", detail={"errors": errors}
        ) from exc
    event: dict[str, Any] = json.loads(payload)
    return event


def stripe_webhook_handle(*, payload: bytes, signature: str) -> WebhookReceipt:
    """Verify a Stripe webhook and apply it exactly once per event id.

    A bad, missing or out-of-tolerance signature is a 400 (invalid_signature), a signed body
    that is not a well-formed event a 400 (invalid_payload); neither records anything. A replay
    returns the stored event and changes nothing; unknown types and invoices are recorded.
    """
    _webhook_verify(payload=payload, signature=signature)
    event = _webhook_event(payload)
    with transaction.atomic():
        # The unique event id makes a concurrent duplicate wait here, then find this row.
        record, created = StripeEvent.objects.get_or_create(
            event_id=str(event["id"]), defaults={"type": str(event["type"])[:64], "payload": event}
        )
        if not created:
            return WebhookReceipt(event=record, replay=True)
        stripe_object = (event.get("data") or {}).get("object") or {}
        invoice = None
        if event["type"] not in HANDLED_TYPES:
            record.outcome = "ignored: unhandled event type"
        elif (
            stripe_object.get("object") != "invoice"
            or (invoice := _invoice_of(stripe_object)) is None
        ):
            record.outcome = "ignored: not one of our invoices"
        else:
            invoice = invoice_lock(invoice)
            record.invoice = invoice
            record.outcome = _apply(event, invoice)
        record.save(update_fields=["outcome", "invoice"])
    logger.info("stripe event %s (%s): %s", record.event_id, record.type, record.outcome)
    return WebhookReceipt(event=record, replay=False)
