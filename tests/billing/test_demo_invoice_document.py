"""The demo invoice as its customer downloads it: rendered to an image (pypdfium2, the PDF engine
of Chromium), it shows both parties with their legal names, addresses and tax ids, each line's
explanation once, and the status the API gives."""

from __future__ import annotations

import io
import re

import pypdfium2
import pytest
from django.core.management import call_command

from accounts.demo import DEMO_BILLING_PROFILES
from accounts.models import Organization
from billing.models import Invoice, InvoiceStatus
from billing.rendering import invoice_document
from contracts.choices import PricingBasis

pytestmark = pytest.mark.django_db


def pdf_pages(content: bytes) -> list[tuple[str, object]]:
    """Each page's text (lines joined by spaces, as a reader would read on) and its image."""
    document = pypdfium2.PdfDocument(content)
    pages = []
    for page in document:
        text = page.get_textpage().get_text_range()
        image = page.render(scale=1.5).to_pil()
        pages.append((" ".join(text.split()), image))
    return pages


def test_the_demo_invoice_pdf_shows_both_parties_each_explanation_once_and_the_api_status(
    client_for,
):
    call_command("seed_demo", stdout=io.StringIO())
    customer = Organization.objects.get(slug="demo-customer")
    # The latest card-hour invoice: the one with price steps and an exit fee to explain (which
    # invoice gets the highest pk depends on the order the cycle drafts periods in).
    invoice = (
        Invoice.objects.filter(customer=customer, contract__pricing_basis=PricingBasis.CARD_HOUR)
        .exclude(status=InvoiceStatus.DRAFT)
        .order_by("-period_start", "-pk")
        .first()
    )
    assert invoice is not None, "the demo bills its customer"
    client = client_for(customer)

    api = client.get(f"/api/v1/invoices/{invoice.pk}/").json()
    response = client.get(f"/api/v1/invoices/{invoice.pk}/pdf")
    assert response.status_code == 200
    content = b"".join(response.streaming_content) if response.streaming else response.content

    pages = pdf_pages(content)
    text = " ".join(page_text for page_text, _ in pages)
    # The page really renders: an A4 page at 1.5x with ink on it, not a blank sheet.
    image = pages[0][1]
    assert image.size[0] > 800
    assert image.convert("L").getextrema()[0] < 64

    # Both parties: legal name, address, tax id, as in the profiles and the API.
    for slug, party in (("demo-provider", api["lessor"]), ("demo-customer", api["lessee"])):
        profile = DEMO_BILLING_PROFILES[slug]
        assert party["name"] == profile["legal_name"]
        for shown in (profile["legal_name"], profile["address_line1"], profile["tax_id"]):
            assert shown in text, f"{shown!r} is not on the PDF"

    # The status the API says, and no other status word beside "Status".
    label = InvoiceStatus(api["status"]).label
    assert re.findall(r"Status\s*(\w+)", text)[0] == label

    # Each line's explanation once: its description and the contract events' sentences it does
    # not already say, each printed as many times as there are lines that say it.
    document = invoice_document(invoice)
    sentences: dict[str, int] = {}
    for line in document["lines"]:
        said = [line["description"], *line["events"]]
        assert len(set(said)) == len(said), f"line {line['position']} repeats a sentence"
        for sentence in said:
            sentences[sentence] = sentences.get(sentence, 0) + 1
    explained = invoice.lines.filter(events__isnull=False).distinct().count()
    assert explained, "the demo invoice's lines are priced by contract events"
    for sentence, count in sentences.items():
        assert text.count(" ".join(sentence.split())) == count, sentence
