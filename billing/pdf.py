"""The PDF primitives Cardhour's documents share (invoices, credit notes, provider statements):
an A4 page with a numbered footer, the issuer / bill-to / facts header, wrapped paragraphs,
right-aligned totals, a warning banner and plain tables. The PDF core fonts are latin-1, so
every text goes through `ascii_safe`."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

from fpdf import FPDF
from fpdf.fonts import FontFace

# Characters that show up in descriptions and contract-event explanations but are not in the
# latin-1 core fonts of the PDF (or read badly there): their ASCII spelling.
ASCII_REPLACEMENTS: dict[str, str] = {
    "\u2265": ">=",  # greater-than or equal to
    "\u2264": "<=",  # less-than or equal to
    "\u2260": "!=",  # not equal to
    "\u2248": "~",  # almost equal to
    "\u2014": "-",  # em dash
    "\u2013": "-",  # en dash
    "\u2012": "-",  # figure dash
    "\u2212": "-",  # minus sign
    "\u00d7": "x",  # multiplication sign
    "\u00f7": "/",  # division sign
    "\u2026": "...",  # horizontal ellipsis
    "\u2018": "'",  # left single quotation mark
    "\u2019": "'",  # right single quotation mark
    "\u201a": ",",  # single low-9 quotation mark
    "\u201c": '"',  # left double quotation mark
    "\u201d": '"',  # right double quotation mark
    "\u201e": '"',  # double low-9 quotation mark
    "\u2022": "-",  # bullet
    "\u00b7": "-",  # middle dot
    "\u2192": "->",  # rightwards arrow
    "\u2190": "<-",  # leftwards arrow
    "\u21d2": "=>",  # rightwards double arrow
    "\u20ac": "EUR",  # euro sign
    "\u00a3": "GBP",  # pound sign
    "\u00a5": "JPY",  # yen sign
    "\u20b9": "INR",  # indian rupee sign
    "\u20a9": "KRW",  # won sign
    "\u2122": "(TM)",  # trade mark sign
    # Letters without a decomposition to a base letter.
    "\u0141": "L",  # latin capital letter l with stroke
    "\u0142": "l",  # latin small letter l with stroke
    "\u0110": "D",  # latin capital letter d with stroke
    "\u0111": "d",  # latin small letter d with stroke
    "\u0131": "i",  # latin small letter dotless i
    "\u0152": "OE",  # latin capital ligature oe
    "\u0153": "oe",  # latin small ligature oe
    "\u00a0": " ",
    "\u202f": " ",
    "\u2009": " ",
    "\u200b": "",
}

PDF_FONT = "Helvetica"
# Width (mm) of the issuer / bill-to column; the facts column starts right of it at x=115.
LEFT_WIDTH = 95


def ascii_safe(text: str) -> str:
    """Text the latin-1 PDF core fonts can print: known symbols spelled in ASCII, rest folded."""
    for symbol, spelling in ASCII_REPLACEMENTS.items():
        text = text.replace(symbol, spelling)
    out: list[str] = []
    for char in text:
        if ord(char) < 256:
            out.append(char)
            continue
        # Accented letters outside latin-1 (e.g. "ł", "ő") keep their base letter.
        folded = "".join(
            c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c)
        )
        out.append(folded if folded and all(ord(c) < 256 for c in folded) else "?")
    return "".join(out)


class DocumentPdf(FPDF):
    """An A4 page with a footer that names the document and counts pages."""

    def __init__(self, footer_text: str) -> None:
        """Portrait A4 in millimetres; the footer text is sanitized once here."""
        super().__init__(orientation="P", unit="mm", format="A4")
        self.footer_text = ascii_safe(footer_text)
        self.set_margins(15, 15, 15)
        self.set_auto_page_break(auto=True, margin=20)

    def footer(self) -> None:
        """Document name and 'page n of N' on every page."""
        self.set_y(-13)
        self.set_font(PDF_FONT, size=8)
        self.set_text_color(110)
        self.cell(0, 5, f"{self.footer_text} - page {self.page_no()} of {{nb}}", align="C")
        self.set_text_color(0)


def pdf_text(
    pdf: FPDF, text: str, *, size: float = 9, style: str = "", height: float = 4.5
) -> None:
    """One left-aligned paragraph that wraps at the right margin."""
    pdf.set_font(PDF_FONT, style=style, size=size)
    pdf.multi_cell(0, height, ascii_safe(text), new_x="LMARGIN", new_y="NEXT")


def pdf_header(pdf: DocumentPdf, doc: dict[str, Any], facts: list[tuple[str, str]]) -> None:
    """Issuer and title on top, the bill-to block on the left and the key facts on the right."""
    pdf.add_page()
    top = pdf.get_y()
    pdf.set_font(PDF_FONT, style="B", size=15)
    pdf.multi_cell(LEFT_WIDTH, 7, ascii_safe(doc["issuer"]["name"]), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(PDF_FONT, size=9)
    for line in doc["issuer"]["lines"]:
        pdf.multi_cell(LEFT_WIDTH, 4.5, ascii_safe(line), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font(PDF_FONT, style="B", size=9)
    pdf.cell(LEFT_WIDTH, 5, doc["customer_label"], new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(
        LEFT_WIDTH, 5, ascii_safe(doc["customer"]["name"]), new_x="LMARGIN", new_y="NEXT"
    )
    pdf.set_font(PDF_FONT, size=9)
    for line in doc["customer"]["lines"]:
        pdf.multi_cell(LEFT_WIDTH, 4.5, ascii_safe(line), new_x="LMARGIN", new_y="NEXT")
    left_bottom = pdf.get_y()

    pdf.set_xy(125, top)
    pdf.set_font(PDF_FONT, style="B", size=15)
    pdf.cell(70, 8, ascii_safe(doc["title"].upper()), align="R", new_x="LEFT", new_y="NEXT")
    for label, value in facts:
        pdf.set_x(115)
        pdf.set_font(PDF_FONT, size=8.5)
        pdf.cell(28, 5, ascii_safe(label), new_x="RIGHT", new_y="TOP")
        text, size = ascii_safe(value), 8.5
        pdf.set_font(PDF_FONT, style="B", size=size)
        # Long issuer slugs make long numbers: shrink rather than run into the label.
        while size > 6 and pdf.get_string_width(text) > 51:
            size -= 0.5
            pdf.set_font(PDF_FONT, style="B", size=size)
        pdf.cell(52, 5, text, align="R", new_x="LEFT", new_y="NEXT")
    pdf.set_xy(pdf.l_margin, max(left_bottom, pdf.get_y()) + 6)


def pdf_totals(pdf: FPDF, rows: list[tuple[str, str, bool]]) -> None:
    """Right-aligned label/amount rows under the table; bold ones are the totals."""
    pdf.ln(3)
    for label, value, bold in rows:
        pdf.set_x(105)
        pdf.set_font(PDF_FONT, style="B" if bold else "", size=9.5)
        pdf.cell(50, 6, ascii_safe(label), align="R")
        pdf.cell(40, 6, ascii_safe(value), align="R", new_x="LMARGIN", new_y="NEXT")


def pdf_banner(pdf: FPDF, text: str) -> None:
    """A red line of warning text (draft, void)."""
    pdf.set_text_color(170, 0, 0)
    pdf_text(pdf, text, size=11, style="B", height=6)
    pdf.set_text_color(0)
    pdf.ln(2)


def pdf_bytes(pdf: FPDF, *, compress: bool) -> bytes:
    """The finished document; compress=False keeps page text readable for tests."""
    pdf.set_compression(compress)
    return bytes(pdf.output())


def plain_table(
    pdf: FPDF,
    *,
    col_widths: tuple[float, ...],
    text_align: tuple[str, ...],
    headings: Iterable[str],
    rows: Iterable[Iterable[str]],
) -> None:
    """A small table in the documents' style: bold grey headings, horizontal rules, and every
    cell printed as ASCII-safe text."""
    pdf.set_font(PDF_FONT, size=8.5)
    with pdf.table(
        col_widths=col_widths,
        text_align=text_align,
        headings_style=FontFace(emphasis="BOLD", fill_color=(230, 230, 230)),
        line_height=4.5,
        padding=1.2,
        borders_layout="HORIZONTAL_LINES",
    ) as table:
        heading = table.row()
        for title in headings:
            heading.cell(title)
        for values in rows:
            row = table.row()
            for value in values:
                row.cell(ascii_safe(value))
