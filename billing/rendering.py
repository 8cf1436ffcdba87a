"""Invoice and credit-note documents: one context per document, rendered to HTML and to PDF.

Both renderers read the same preformatted context, so the e-mailed HTML and the attached PDF
can never disagree about an amount, a date or a line. Amounts are rounded to the currency's
minor unit with thousands separators; dates are UTC calendar dates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.template.loader import render_to_string
from fpdf import FPDF
from fpdf.fonts import FontFace

from billing.attribution import GroupCost
from billing.models import CreditNote, Invoice, InvoiceStatus, LineKind
from billing.parties import document_party
from billing.pdf import (
    PDF_FONT,
    DocumentPdf,
    ascii_safe,
    pdf_banner,
    pdf_bytes,
    pdf_header,
    pdf_text,
    pdf_totals,
    plain_table,
)
from contracts.models import ContractEvent
from core.money import minor_unit, round_money

# ------------------------------------------------------------------ formatting


def format_amount(amount: Decimal, currency: str) -> str:
    """An amount as documents write it (ISO code, not symbol: unlike core.money.format_money):
    in the currency's minor unit with thousands separators, '1,234.56 USD'."""
    places = minor_unit(currency)
    return f"{round_money(amount, currency):,.{places}f} {currency}"


def format_number(value: Decimal, *, min_places: int = 0) -> str:
    """A quantity or unit price without trailing zeros (but at least min_places decimals)."""
    text = f"{value.normalize():f}"
    whole, _, fraction = text.partition(".")
    fraction = fraction.ljust(min_places, "0")
    grouped = f"{int(whole):,}" if whole.lstrip("-").isdigit() else whole
    if whole.startswith("-") and not grouped.startswith("-"):
        grouped = f"-{grouped}"  # int("-0") loses the sign of a small negative rate
    return f"{grouped}.{fraction}" if fraction else grouped


def format_date(moment: datetime | None) -> str:
    """A timestamp as its UTC calendar date, or an empty string."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d") if moment else ""


def format_pct(value: Decimal) -> str:
    """A percentage without trailing zeros: '19 %', '7.5 %'."""
    return f"{format_number(value)} %"


# ------------------------------------------------------------------ contexts


def _explanations_beyond(description: str, events: Iterable[ContractEvent]) -> list[str]:
    """The events' sentences a line's description does not already say, each once.

    A decision line's description is its event's explanation, and a stepped-rate line quotes
    the step's; printing them again under the line would say the same thing twice.
    """
    said = [description]
    for event in events:
        if not any(event.explanation in text for text in said):
            said.append(event.explanation)
    return said[1:]


@dataclass(frozen=True, slots=True)
class CostCentres:
    """An invoice's amounts split over the values of one grouping (a tag key, contract, model or
    mode), as billing.selectors.attribution.invoice_cost_groups computes them."""

    title: str
    groups: dict[str, GroupCost]


def _cost_centre_rows(centres: CostCentres | None, currency: str) -> list[dict[str, str]]:
    if centres is None:
        return []
    ordered = sorted(centres.groups.items(), key=lambda item: (-item[1].total, item[0]))
    return [
        {
            "group": group or "(untagged)",
            "amount": format_amount(cost.amount, currency),
            "tax": format_amount(cost.tax, currency),
            "total": format_amount(cost.total, currency),
        }
        for group, cost in ordered
    ]


def invoice_document(invoice: Invoice, cost_centres: CostCentres | None = None) -> dict[str, Any]:
    """Everything an invoice document shows, preformatted; both renderers use only this."""
    currency = invoice.currency
    lines = invoice.lines.order_by("position").prefetch_related("events")
    balance = invoice.total - invoice.credited_total
    drawn = -sum((line.amount for line in lines if line.kind == LineKind.BALANCE_DRAW), Decimal(0))
    return {
        "kind": "invoice",
        "title": "Invoice",
        "number": invoice.number or f"Draft {invoice.pk}",
        "status": invoice.status,
        "status_label": invoice.get_status_display(),
        "is_draft": invoice.status == InvoiceStatus.DRAFT,
        "is_void": invoice.status == InvoiceStatus.VOID,
        "void_reason": invoice.void_reason,
        "issuer": document_party(invoice.issuer),
        "customer": document_party(invoice.customer),
        "customer_label": "Bill to",
        "contract_number": invoice.contract.number,
        "period_start": format_date(invoice.period_start),
        "period_end": format_date(invoice.period_end),
        "period": f"{format_date(invoice.period_start)} to {format_date(invoice.period_end)}",
        "currency": currency,
        "issued_on": format_date(invoice.issued_at),
        "due_on": format_date(invoice.due_at),
        "lines": [
            {
                "position": line.position,
                "kind": line.get_kind_display(),
                "description": line.description,
                "quantity": format_number(line.quantity),
                "unit": line.unit,
                "unit_price": format_number(line.unit_price, min_places=minor_unit(currency)),
                "amount": format_amount(line.amount, currency),
                "taxable": line.taxable,
                "service_period": (
                    f"{format_date(line.service_start)} to {format_date(line.service_end)}"
                    if line.service_start and line.service_end
                    else ""
                ),
                "events": _explanations_beyond(line.description, line.events.all()),
            }
            for line in lines
        ],
        "subtotal": format_amount(invoice.subtotal, currency),
        "taxable_amount": format_amount(invoice.taxable_amount, currency),
        "tax_rate": format_pct(invoice.tax_rate_pct),
        "tax": format_amount(invoice.tax, currency),
        "total": format_amount(invoice.total, currency),
        "has_credits": invoice.credited_total > 0,
        "credited_total": format_amount(invoice.credited_total, currency),
        "balance": format_amount(balance, currency),
        "cost_centre_title": cost_centres.title if cost_centres is not None else "",
        "cost_centres": _cost_centre_rows(cost_centres, currency),
        "has_draws": drawn > 0,
        "drawn_from_balance": format_amount(drawn, currency),
    }


def credit_note_document(note: CreditNote) -> dict[str, Any]:
    """Everything a credit note shows, preformatted, with the invoice it corrects."""
    currency = note.currency
    return {
        "kind": "credit_note",
        "title": "Credit note",
        "number": note.number,
        "invoice_number": note.invoice.number or "",
        "contract_number": note.invoice.contract.number,
        "issuer": document_party(note.issuer),
        "customer": document_party(note.customer),
        "customer_label": "Credit to",
        "currency": currency,
        "issued_on": format_date(note.issued_at),
        "reason": note.reason,
        "lines": [
            {"description": line.description, "amount": format_amount(line.amount, currency)}
            for line in note.lines.all()
        ],
        "subtotal": format_amount(note.subtotal, currency),
        "tax": format_amount(note.tax, currency),
        "total": format_amount(note.total, currency),
    }


# ------------------------------------------------------------------ HTML


def invoice_html(invoice: Invoice, cost_centres: CostCentres | None = None) -> str:
    """The invoice as one self-contained HTML page (inline CSS, no external assets)."""
    return render_to_string(
        "billing/invoice.html", {"doc": invoice_document(invoice, cost_centres)}
    )


def invoice_text(invoice: Invoice) -> str:
    """The invoice as plain text (the e-mail body for clients that do not show HTML)."""
    return render_to_string("billing/invoice_email.txt", {"doc": invoice_document(invoice)})


def credit_note_html(note: CreditNote) -> str:
    """The credit note as one self-contained HTML page."""
    return render_to_string("billing/credit_note.html", {"doc": credit_note_document(note)})


# ------------------------------------------------------------------ PDF


def _cost_centre_table(pdf: FPDF, doc: dict[str, Any]) -> None:
    """The invoice's amounts by cost centre, under the totals."""
    pdf.ln(4)
    pdf_text(pdf, doc["cost_centre_title"], size=10, style="B", height=6)
    plain_table(
        pdf,
        col_widths=(70, 40, 30, 40),
        text_align=("LEFT", "RIGHT", "RIGHT", "RIGHT"),
        headings=("Cost centre", "Amount", "Tax", "Total"),
        rows=(
            [centre[name] for name in ("group", "amount", "tax", "total")]
            for centre in doc["cost_centres"]
        ),
    )


def invoice_pdf(
    invoice: Invoice, *, compress: bool = True, cost_centres: CostCentres | None = None
) -> bytes:
    """The invoice as a PDF: header, a wrapping line table, totals and numbered pages; with
    `cost_centres`, a table of the amounts by cost centre after the totals."""
    doc = invoice_document(invoice, cost_centres)
    pdf = DocumentPdf(f"{doc['title']} {doc['number']} - {doc['issuer']['name']}")
    pdf.set_title(ascii_safe(f"{doc['title']} {doc['number']}"))
    pdf.set_author(ascii_safe(doc["issuer"]["name"]))
    if invoice.issued_at:
        pdf.set_creation_date(invoice.issued_at)  # the same invoice renders to the same bytes
    facts = [
        ("Number", doc["number"]),
        ("Status", doc["status_label"]),
        ("Contract", doc["contract_number"]),
        ("Period", doc["period"]),
        ("Issued", doc["issued_on"] or "-"),
        ("Due", doc["due_on"] or "-"),
        ("Currency", doc["currency"]),
    ]
    pdf_header(pdf, doc, facts)
    if doc["is_draft"]:
        pdf_banner(pdf, "DRAFT - not a valid invoice; amounts may still change.")
    if doc["is_void"]:
        pdf_banner(pdf, f"VOID - {doc['void_reason'] or 'this invoice was voided.'}")

    pdf.set_font(PDF_FONT, size=8.5)
    with pdf.table(
        col_widths=(8, 78, 24, 18, 25, 27),
        text_align=("RIGHT", "LEFT", "RIGHT", "LEFT", "RIGHT", "RIGHT"),
        headings_style=FontFace(emphasis="BOLD", fill_color=(230, 230, 230)),
        line_height=4.5,
        padding=1.2,
        repeat_headings=1,
        borders_layout="HORIZONTAL_LINES",
    ) as table:
        heading = table.row()
        for title in ("#", "Description", "Quantity", "Unit", "Unit price", "Amount"):
            heading.cell(title)
        for line in doc["lines"]:
            description = line["description"]
            if line["service_period"]:
                description += f"\nService period: {line['service_period']}"
            for explanation in line["events"]:
                description += f"\n- {explanation}"
            row = table.row()
            row.cell(str(line["position"]))
            row.cell(ascii_safe(description))
            row.cell(ascii_safe(line["quantity"]))
            row.cell(ascii_safe(line["unit"]))
            row.cell(ascii_safe(line["unit_price"]))
            row.cell(ascii_safe(line["amount"]))

    rows = [
        ("Subtotal", doc["subtotal"], False),
        (f"Tax ({doc['tax_rate']} of {doc['taxable_amount']})", doc["tax"], False),
        ("Total", doc["total"], True),
    ]
    if doc["has_draws"]:
        rows.insert(
            2,
            (
                "Paid from the prepaid balance (in the subtotal)",
                f"-{doc['drawn_from_balance']}",
                False,
            ),
        )
    if doc["has_credits"]:
        rows += [
            ("Credited", f"-{doc['credited_total']}", False),
            ("Balance", doc["balance"], True),
        ]
    pdf_totals(pdf, rows)
    if cost_centres is not None:
        _cost_centre_table(pdf, doc)
    if doc["due_on"] and not doc["is_void"]:
        pdf.ln(4)
        pdf_text(pdf, f"Payment due by {doc['due_on']}. Please quote {doc['number']}.")
    return pdf_bytes(pdf, compress=compress)


def credit_note_pdf(note: CreditNote, *, compress: bool = True) -> bytes:
    """The credit note as a PDF: header, credited amounts, reason and totals."""
    doc = credit_note_document(note)
    pdf = DocumentPdf(f"{doc['title']} {doc['number']} - {doc['issuer']['name']}")
    pdf.set_title(ascii_safe(f"{doc['title']} {doc['number']}"))
    pdf.set_author(ascii_safe(doc["issuer"]["name"]))
    pdf.set_creation_date(note.issued_at)
    facts = [
        ("Number", doc["number"]),
        ("Invoice", doc["invoice_number"]),
        ("Contract", doc["contract_number"]),
        ("Issued", doc["issued_on"]),
        ("Currency", doc["currency"]),
    ]
    pdf_header(pdf, doc, facts)
    pdf_text(pdf, f"Reason: {doc['reason']}")
    pdf.ln(3)
    pdf.set_font(PDF_FONT, size=8.5)
    with pdf.table(
        col_widths=(140, 40),
        text_align=("LEFT", "RIGHT"),
        headings_style=FontFace(emphasis="BOLD", fill_color=(230, 230, 230)),
        line_height=4.5,
        padding=1.2,
        borders_layout="HORIZONTAL_LINES",
    ) as table:
        heading = table.row()
        heading.cell("Description")
        heading.cell("Amount")
        for line in doc["lines"]:
            row = table.row()
            row.cell(ascii_safe(line["description"]))
            row.cell(ascii_safe(line["amount"]))
    pdf_totals(
        pdf,
        [
            ("Subtotal", doc["subtotal"], False),
            ("Tax", doc["tax"], False),
            ("Total credited", doc["total"], True),
        ],
    )
    return pdf_bytes(pdf, compress=compress)
