"""core.fields: one precision per kind of figure, and the currency check the database holds."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from billing.models import Invoice, InvoiceLine
from contracts.models import Contract
from core.fields import (
    AMOUNT_PLACES,
    CURRENCY_PATTERN,
    QUANTITY_PLACES,
    RATE_PLACES,
    amount_field,
    currency_is_iso,
    quantity_field,
    rate_field,
)
from leasing.models import Lease, Offer, Quote
from tests.leasing.factories import make_offer

pytestmark = pytest.mark.django_db


def test_each_kind_has_one_precision_in_every_app() -> None:
    assert (rate_field().max_digits, rate_field().decimal_places) == (20, RATE_PLACES) == (20, 6)
    assert (amount_field().decimal_places, quantity_field().decimal_places) == (4, 6)
    assert (AMOUNT_PLACES, QUANTITY_PLACES) == (4, 6)
    rates = [
        Contract._meta.get_field("base_rate_per_gpu_hour"),
        Offer._meta.get_field("price_per_gpu_hour"),
        Quote._meta.get_field("price_per_gpu_hour"),
        Lease._meta.get_field("price_per_gpu_hour"),
        InvoiceLine._meta.get_field("unit_price"),
    ]
    assert {(field.max_digits, field.decimal_places) for field in rates} == {(20, 6)}
    amounts = [
        Quote._meta.get_field("total"),
        Invoice._meta.get_field("total"),
        InvoiceLine._meta.get_field("amount"),
    ]
    assert {(field.max_digits, field.decimal_places) for field in amounts} == {(20, 4)}


def test_a_check_built_by_currency_is_iso_keeps_its_name_and_pattern() -> None:
    check = currency_is_iso("site_currencies_iso", fields=("power_currency", "opex_currency"))
    assert check.name == "site_currencies_iso"
    assert [child[1] for child in check.condition.children] == [CURRENCY_PATTERN] * 2


def test_a_quote_total_keeps_four_places_through_a_real_write(provider, customer) -> None:
    offer = make_offer(provider)
    quote = Quote.objects.create(
        offer=offer,
        customer=customer,
        gpu_count=1,
        start=offer.available_from,
        end=offer.available_from + timedelta(hours=10),
        pricing_mode="on_demand",
        price_per_gpu_hour=Decimal("2.123456"),
        total=Decimal("1234.5678"),
        currency="KWD",
        breakdown={},
        free_gpus_at_quote=1,
        expires_at=offer.available_from,
    )
    quote.refresh_from_db()
    assert quote.total == Decimal("1234.5678")
    assert quote.price_per_gpu_hour == Decimal("2.123456")


def test_the_database_refuses_a_currency_that_is_not_three_upper_case_letters(
    provider, customer
) -> None:
    offer = make_offer(provider)
    with pytest.raises(IntegrityError, match="offer_currency_iso"), transaction.atomic():
        Offer.objects.filter(pk=offer.pk).update(currency="usd")
