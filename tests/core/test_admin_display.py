"""How the admin writes money, rates and periods on every page (core.admin_display)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from billing.models import CreditNote, CreditNoteLine, Invoice, InvoiceLine
from core.admin_display import duration_text, format_period, format_rate, lookup_field, shown_value
from core.money import format_money
from economics.models import AssetEconomics, AssetPayback
from leasing.models import Allocation

START = datetime(2026, 8, 28, tzinfo=UTC)


@pytest.mark.parametrize(
    ("amount", "currency", "shown"),
    [
        ("7454.9800", "USD", "$7,454.98"),
        ("-1234567.005", "EUR", "-€1,234,567.01"),  # half-up, once, to the minor unit
        ("7454.5", "JPY", "¥7,455"),  # no minor unit
        ("620000", "AUD", "A$620,000.00"),
        ("12", "CHF", "CHF12.00"),
    ],
)
def test_money_reads_in_its_currencys_format(amount, currency, shown):
    assert format_money(Decimal(amount), currency).replace("\xa0", " ") == shown


def test_a_rate_keeps_the_places_it_needs_and_no_more():
    assert format_rate(Decimal("2.450000"), "USD") == "$2.45"
    assert format_rate(Decimal("0.001234"), "USD") == "$0.001234"


def test_a_period_reads_as_two_instants_and_its_length():
    assert format_period(START, START + timedelta(days=4)) == (
        "2026-08-28 00:00 → 2026-09-01 00:00 UTC (4 days)"
    )
    assert format_period(START, START + timedelta(hours=1)).endswith("(1 hour)")
    assert format_period(START, None) == "from 2026-08-28 00:00 UTC (open-ended)"
    assert duration_text(timedelta(days=1, hours=6, minutes=1)) == "1 day 6 hours 1 minute"


def test_fields_are_written_from_their_row_and_the_currency_beside_them():
    invoice = Invoice(total=Decimal("7454.9800"), currency="USD")
    assert shown_value(invoice, Invoice._meta.get_field("total")) == "$7,454.98"
    line = InvoiceLine(unit_price=Decimal("2.400000"), currency="EUR")
    assert shown_value(line, InvoiceLine._meta.get_field("unit_price")) == "€2.40"
    node = AssetEconomics(capex=Decimal("300000"), capex_currency="USD")
    assert shown_value(node, AssetEconomics._meta.get_field("capex")) == "$300,000.00"
    # A credit note line has no currency: its note's, when the note is loaded with it.
    credit = CreditNoteLine(credit_note=CreditNote(currency="GBP"), amount=Decimal("10"))
    assert shown_value(credit, CreditNoteLine._meta.get_field("amount")) == "£10.00"
    # Fractions and counts with a currency beside them are not money.
    payback = AssetPayback(
        currency="USD", trailing_utilization=Decimal("0.5"), projected_payback_months=Decimal("9")
    )
    assert shown_value(payback, AssetPayback._meta.get_field("trailing_utilization")) is None
    assert shown_value(payback, AssetPayback._meta.get_field("projected_payback_months")) is None
    allocation = Allocation(period=DateTimeTZRange(START, START + timedelta(days=2), "[)"))
    assert shown_value(allocation, Allocation._meta.get_field("period")).endswith("(2 days)")


def test_the_admin_lookup_answers_text_for_money_and_django_s_answer_otherwise():
    invoice = Invoice(total=Decimal("1000"), currency="USD", number="INV-1")
    assert lookup_field("total", invoice) == (None, None, "$1,000.00")
    field, _, value = lookup_field("number", invoice)
    assert field is Invoice._meta.get_field("number") and value == "INV-1"
    # A list-editable column stays an input.
    editable = type("Editable", (), {"list_editable": ["total"]})()
    assert lookup_field("total", invoice, editable)[2] == Decimal("1000")
