"""Invoice documents and delivery: one context for HTML and PDF, e-mail once, resumable runs."""

from __future__ import annotations

import re
import zlib
from decimal import Decimal
from pathlib import Path

import pytest

from accounts.services import billing_profile_update
from billing.models import BillingRun, BillingRunKind, Invoice, InvoiceStatus, LineKind
from billing.pdf import ascii_safe
from billing.rendering import (
    credit_note_html,
    credit_note_pdf,
    format_amount,
    invoice_document,
    invoice_html,
    invoice_pdf,
)
from billing.services.delivery import invoice_deliver, invoice_email, invoice_pdf_store
from billing.services.documents import credit_note_issue
from contracts.choices import EventKind
from contracts.models import ContractEvent
from core.errors import ApplicationError, Conflict, SemanticError
from tests.billing.invoice_factories import make_draft_invoice, make_issued_invoice

pytestmark = pytest.mark.django_db

LONG_DESCRIPTION = (
    "Availability 99.2 % \u2265 99.0 % floor \u2014 64 \u00d7 H200 card-hours at the stepped "
    "rate, with a description long enough to wrap over several lines of the PDF table so the "
    "row grows instead of running into the next column \u2026 \u201cquoted\u201d \u20ac note"
)


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path: Path) -> Path:
    """Each test stores its PDFs in its own directory; Stripe stays off."""
    settings.MEDIA_ROOT = str(tmp_path)
    settings.STRIPE_API_KEY = ""
    return tmp_path


@pytest.fixture
def invoice(provider, customer) -> Invoice:
    """January's issued invoice; the customer has one valid billing address (given twice)."""
    customer.billing_emails = ["ap@example.com", "AP@example.com", "not an address"]
    customer.save(update_fields=["billing_emails"])
    return make_issued_invoice(provider, customer)


def stored_pdfs(root: Path) -> list[Path]:
    """Every PDF file under the media root."""
    return sorted(root.rglob("*.pdf"))


def pdf_text(pdf: bytes) -> str:
    """The text of an uncompressed PDF, text blocks joined by spaces (wrapped lines rejoin)."""
    blocks = re.findall(rb"BT (.*?) ET", pdf, flags=re.S)
    strings = (b"".join(re.findall(rb"\((.*?)(?<!\\)\) Tj", block)) for block in blocks)
    text = " ".join(
        s.replace(rb"\(", b"(").replace(rb"\)", b")").decode("latin-1") for s in strings
    )
    return re.sub(r"\s+", " ", text)


# ---------------------------------------------------------------- rendering


def test_money_has_the_minor_unit_and_thousands_separators():
    assert format_amount(Decimal("114278.4"), "USD") == "114,278.40 USD"
    assert format_amount(Decimal("-1142.78"), "EUR") == "-1,142.78 EUR"
    assert format_amount(Decimal("1234567.4"), "JPY") == "1,234,567 JPY"


def test_symbols_outside_latin_1_are_spelled_in_ascii():
    assert ascii_safe("\u2265 99 \u2014 64 \u00d7 H200 \u2192 \u20ac") == ">= 99 - 64 x H200 -> EUR"
    assert ascii_safe("\u0141\u00f3d\u017a \u4e2d") == "L\u00f3dz ?"


def test_the_html_shows_every_line_amount_and_the_total(invoice):
    html = invoice_html(invoice)
    document = invoice_document(invoice)
    assert document["total"] == "113,135.62 USD"
    for line in document["lines"]:
        assert line["description"] in html
        assert line["amount"] in html
    assert "114,278.40 USD" in html
    assert "-1,142.78 USD" in html
    assert document["total"] in html
    assert invoice.number in html
    assert invoice.contract.number in html
    assert "<link" not in html and "<script" not in html  # self-contained


def test_the_pdf_is_a_real_pdf_with_the_number_lines_and_total(invoice):
    pdf = invoice_pdf(invoice, compress=False)
    assert pdf.startswith(b"%PDF-")
    assert pdf.rstrip().endswith(b"%%EOF")
    text = pdf_text(pdf)
    assert invoice.number in text
    assert invoice.contract.number in text
    assert "Acme AI" in text and "Southern Cross GPU" in text
    assert "2026-01-01 to 2026-02-01" in text
    card_hours = invoice.lines.get(kind=LineKind.CARD_HOURS)
    assert card_hours.description in text
    assert "47,616 GPU-hour 2.40 114,278.40 USD" in text
    assert "-1,142.78 USD" in text
    assert "Total 113,135.62 USD" in text
    assert "page 1 of 1" in text
    assert invoice_pdf(invoice).startswith(b"%PDF-")


def test_long_descriptions_and_event_explanations_with_symbols_render_and_wrap(provider, customer):
    # Forty recorded fees, each a line whose description is the fee's explanation.
    fees = [(f"{n}: {LONG_DESCRIPTION}", Decimal("114278.40")) for n in range(40)]
    invoice = make_issued_invoice(provider, customer, fees=fees)
    event = ContractEvent.objects.create(
        contract=invoice.contract,
        kind=EventKind.PRICE_STEP,
        effective_at=invoice.period_start,
        explanation="Rate stepped 2.40 \u2192 2.04 USD (\u221215 %), floor \u2265 1.80",
    )
    invoice.lines.get(position=1).events.add(event)

    text = pdf_text(invoice_pdf(invoice, compress=False))

    assert "page 3 of" in text  # forty wrapped rows run over several pages
    assert "39: Availability 99.2 % >= 99.0 % floor - 64 x H200 card-hours" in text
    assert 'next column ... "quoted" EUR note' in text
    assert "- Rate stepped 2.40 -> 2.04 USD (-15 %), floor >= 1.80" in text
    assert event.explanation in invoice_html(invoice)


def test_a_credit_note_renders_as_pdf(invoice):
    note = credit_note_issue(
        invoice=invoice, amount=Decimal("100.00"), reason="Outage \u2014 goodwill", actor="ops"
    )
    pdf = credit_note_pdf(note, compress=False)
    assert pdf.startswith(b"%PDF-")
    text = pdf_text(pdf)
    assert note.number in text
    assert invoice.number in text
    assert "Reason: Outage - goodwill" in text
    assert "Total credited 100.00 USD" in text


def test_a_credit_note_names_both_parties_from_their_billing_profiles(invoice):
    for organization, name, tax_id in (
        (invoice.issuer, "Lessor Compute GmbH", "DE123456789"),
        (invoice.customer, "Lessee Labs Ltd", "GB 123 4567 89"),
    ):
        billing_profile_update(
            organization=organization,
            changes={
                "legal_name": name,
                "address_line1": "1 Main Street",
                "city": "Berlin",
                "country": "DE",
                "tax_id": tax_id,
            },
        )
    note = credit_note_issue(invoice=invoice, amount=Decimal("10.00"), reason="r", actor="ops")
    text = pdf_text(credit_note_pdf(note, compress=False))
    html = credit_note_html(note)
    for shown in ("Lessor Compute GmbH", "Lessee Labs Ltd", "Tax id: DE123456789", "Germany"):
        assert shown in text and shown in html
    assert "Credit to" in text


# ---------------------------------------------------------------- PDF storage


def test_the_pdf_is_stored_once_under_the_invoice_number(invoice, media_root):
    stored = invoice_pdf_store(invoice=invoice)
    name = stored.pdf.name
    assert name.endswith(f"{invoice.number}-{invoice.status}.pdf")
    assert stored.pdf.read().startswith(b"%PDF-")

    again = invoice_pdf_store(invoice=invoice)

    assert again.pdf.name == name
    assert len(stored_pdfs(media_root)) == 1


def test_a_draft_has_no_pdf_to_store(invoice):
    draft = make_draft_invoice(
        invoice.issuer, invoice.customer, contract=invoice.contract, period_start=invoice.period_end
    )
    with pytest.raises(Conflict) as error:
        invoice_pdf_store(invoice=draft)
    assert error.value.code == "invoice_not_issued"


# ---------------------------------------------------------------- e-mail


def test_the_invoice_is_emailed_to_the_billing_contacts_with_the_pdf(invoice, mailoutbox):
    sent = invoice_email(invoice=invoice)

    assert len(mailoutbox) == 1
    message = mailoutbox[0]
    assert message.to == ["ap@example.com"]  # deduplicated, invalid one skipped
    assert invoice.number in message.subject
    assert "113,135.62 USD" in message.body
    html, mimetype = message.alternatives[0]
    assert mimetype == "text/html"
    assert "113,135.62 USD" in html
    filename, content, attachment_type = message.attachments[0]
    assert (filename, attachment_type) == (f"{invoice.number}.pdf", "application/pdf")
    assert content.startswith(b"%PDF-")
    sent.refresh_from_db()
    assert sent.status == InvoiceStatus.SENT
    assert sent.emailed_to == ["ap@example.com"]
    assert sent.emailed_at is not None


def test_a_second_email_without_resend_sends_nothing(invoice, mailoutbox):
    first = invoice_email(invoice=invoice)
    invoice_email(invoice=first)
    assert len(mailoutbox) == 1

    invoice_email(invoice=first, resend=True)
    assert len(mailoutbox) == 2
    first.refresh_from_db()
    assert first.status == InvoiceStatus.SENT


def test_a_paid_invoice_is_resent_without_changing_its_status(provider, customer, mailoutbox):
    customer.billing_emails = ["ap@example.com"]
    customer.save(update_fields=["billing_emails"])
    invoice = make_issued_invoice(provider, customer, status=InvoiceStatus.PAID)

    invoice_email(invoice=invoice, resend=True)

    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.PAID
    assert len(mailoutbox) == 1


def test_without_billing_contacts_the_email_fails_and_nothing_changes(
    provider, customer, mailoutbox
):
    invoice = make_issued_invoice(provider, customer)

    with pytest.raises(SemanticError) as error:
        invoice_email(invoice=invoice)

    assert error.value.code == "no_billing_contacts"
    assert mailoutbox == []
    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.FINALIZED
    assert invoice.emailed_at is None


def test_a_void_invoice_is_not_emailed(provider, customer, mailoutbox):
    customer.billing_emails = ["ap@example.com"]
    customer.save(update_fields=["billing_emails"])
    invoice = make_issued_invoice(provider, customer, status=InvoiceStatus.VOID)

    with pytest.raises(Conflict) as error:
        invoice_email(invoice=invoice)

    assert error.value.code == "invoice_void"
    assert mailoutbox == []


# ---------------------------------------------------------------- the pipeline


def test_delivering_twice_sends_one_email_and_stores_one_pdf(invoice, mailoutbox, media_root):
    first = invoice_deliver(invoice_id=invoice.pk)
    second = invoice_deliver(invoice_id=invoice.pk)
    third = invoice_deliver(invoice_id=invoice.pk)

    assert len(mailoutbox) == 1
    # The e-mailed PDF (status Finalized) and the one for the status it has now (Sent).
    assert len(stored_pdfs(media_root)) == 2
    assert first["steps"] == {"pdf": "stored", "email": "sent", "stripe": "disabled"}
    assert second["steps"] == {"pdf": "stored", "email": "already_sent", "stripe": "disabled"}
    assert third["steps"] == {"pdf": "present", "email": "already_sent", "stripe": "disabled"}
    runs = BillingRun.objects.filter(kind=BillingRunKind.DELIVERY).order_by("pk")
    assert [run.delivered for run in runs] == [1, 1, 1]
    assert all(run.finished_at and run.failures == [] for run in runs)
    assert runs[0].summary["invoice_id"] == invoice.pk
    assert runs[0].summary["number"] == invoice.number
    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.SENT


def test_a_rerun_after_a_crash_continues_after_the_stored_pdf(invoice, mailoutbox, media_root):
    invoice_pdf_store(invoice=invoice)  # the crashed run got this far

    result = invoice_deliver(invoice_id=invoice.pk)

    assert result["steps"]["pdf"] == "present"
    assert result["steps"]["email"] == "sent"
    assert len(stored_pdfs(media_root)) == 1
    assert len(mailoutbox) == 1


def test_delivery_without_billing_contacts_is_logged_as_a_failure(provider, customer, mailoutbox):
    invoice = make_issued_invoice(provider, customer)

    result = invoice_deliver(invoice_id=invoice.pk)

    assert result["failures"] == [
        {
            "invoice_id": invoice.pk,
            "step": "email",
            "code": "no_billing_contacts",
            "message": f"{customer.name} has no billing e-mail addresses.",
        }
    ]
    run = BillingRun.objects.get(kind=BillingRunKind.DELIVERY)
    assert run.failures == result["failures"]
    assert run.delivered == 0
    assert run.finished_at is not None
    assert run.summary["steps"] == {"pdf": "stored"}
    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.FINALIZED
    assert mailoutbox == []


def test_an_unexpected_error_is_recorded_and_raised(invoice, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("billing.services.delivery.invoice_pdf", broken)

    with pytest.raises(OSError, match="disk full"):
        invoice_deliver(invoice_id=invoice.pk)

    run = BillingRun.objects.get(kind=BillingRunKind.DELIVERY)
    assert run.failures == [
        {
            "invoice_id": invoice.pk,
            "step": "pdf",
            "code": "unexpected_error",
            "message": "OSError: disk full",
        }
    ]


def test_the_invoice_is_pushed_to_stripe_once_when_enabled(invoice, mailoutbox, monkeypatch):
    pushed: list[int] = []

    def push(*, invoice: Invoice) -> str:
        pushed.append(invoice.pk)
        return "in_test_123"

    # Stripe is the network edge: stand-ins for the two functions delivery calls.
    monkeypatch.setattr("billing.services.delivery.stripe_enabled", lambda: True)
    monkeypatch.setattr("billing.services.delivery.stripe_invoice_push", push)

    first = invoice_deliver(invoice_id=invoice.pk)
    second = invoice_deliver(invoice_id=invoice.pk)

    assert first["steps"]["stripe"] == "pushed"
    assert second["steps"]["stripe"] == "already_pushed"
    assert pushed == [invoice.pk]
    invoice.refresh_from_db()
    assert invoice.stripe_invoice_id == "in_test_123"
    assert invoice.stripe_pushed_at is not None


def test_an_unreachable_stripe_is_recorded_and_raised_for_a_retry(invoice, mailoutbox, monkeypatch):
    def unreachable(*, invoice: Invoice) -> str:
        raise ApplicationError("Stripe is down.", code="stripe_unavailable", status_code=503)

    monkeypatch.setattr("billing.services.delivery.stripe_enabled", lambda: True)
    monkeypatch.setattr("billing.services.delivery.stripe_invoice_push", unreachable)

    with pytest.raises(ApplicationError):
        invoice_deliver(invoice_id=invoice.pk)

    run = BillingRun.objects.get(kind=BillingRunKind.DELIVERY)
    assert run.failures[0]["step"] == "stripe"
    assert run.failures[0]["code"] == "stripe_unavailable"
    assert run.summary["steps"] == {"pdf": "stored", "email": "sent"}
    assert len(mailoutbox) == 1  # the rerun resumes at Stripe and does not e-mail again


def test_delivery_pushes_to_a_real_local_stripe_once(invoice, mailoutbox, local_stripe):
    first = invoice_deliver(invoice_id=invoice.pk)
    second = invoice_deliver(invoice_id=invoice.pk)

    assert first["steps"]["stripe"] == "pushed"
    assert second["steps"]["stripe"] == "already_pushed"
    invoice.refresh_from_db()
    remote = local_stripe.get("/v1/invoices")["data"]
    assert [item["id"] for item in remote] == [invoice.stripe_invoice_id]
    assert len(mailoutbox) == 1


def test_each_line_explains_itself_once_in_the_html_and_the_pdf(invoice):
    credit = invoice.lines.get(kind=LineKind.SLA_CREDIT)
    assert credit.events.filter(explanation=credit.description).exists()
    sentence = re.sub(r"\s+", " ", ascii_safe(credit.description))
    assert pdf_text(invoice_pdf(invoice, compress=False)).count(sentence) == 1
    assert invoice_html(invoice).count(credit.description) == 1


def pdf_text_of_stored(pdf: bytes) -> str:
    """pdf_text of a compressed PDF: each Flate stream inflated in place."""
    inflated = re.sub(
        rb"stream\r?\n(.*?)\r?\nendstream",
        lambda match: b"stream\n" + zlib.decompress(match.group(1)) + b"\nendstream",
        pdf,
        flags=re.S,
    )
    return pdf_text(inflated)


def test_the_downloaded_pdf_says_the_status_the_api_says(invoice, client_for, mailoutbox):
    invoice_pdf_store(invoice=invoice)  # stored while finalized, as delivery does
    invoice_email(invoice=invoice)
    client = client_for(invoice.customer)
    status = client.get(f"/api/v1/invoices/{invoice.pk}").json()["status"]
    assert status == "sent"

    text = pdf_text_of_stored(client.get(f"/api/v1/invoices/{invoice.pk}/pdf").content)

    assert "Status Sent" in text and "Finalized" not in text
    assert InvoiceStatus(status).label == "Sent"
