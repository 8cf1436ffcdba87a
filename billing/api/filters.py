"""Filters of the billing API: invoices, credit notes and usage rollups."""

from __future__ import annotations

import django_filters

from billing.models import CreditNote, Invoice, InvoiceStatus, UsageRollup
from core.api.filters import IsoDateTimeFilter


class InvoiceFilter(django_filters.FilterSet):
    """Filter invoices by status, contract, parties, currency and a window of period starts."""

    status = django_filters.MultipleChoiceFilter(choices=InvoiceStatus.choices)
    contract = django_filters.NumberFilter(field_name="contract_id")
    contract_number = django_filters.CharFilter(field_name="contract__number", lookup_expr="iexact")
    number = django_filters.CharFilter(lookup_expr="iexact")
    issuer = django_filters.NumberFilter(field_name="issuer_id")
    customer = django_filters.NumberFilter(field_name="customer_id")
    currency = django_filters.CharFilter(lookup_expr="iexact")
    start = IsoDateTimeFilter(field_name="period_start", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="period_start", lookup_expr="lt")
    total__gte = django_filters.NumberFilter(field_name="total", lookup_expr="gte")
    total__lte = django_filters.NumberFilter(field_name="total", lookup_expr="lte")

    class Meta:
        model = Invoice
        fields = ["status", "contract", "currency"]


class CreditNoteFilter(django_filters.FilterSet):
    """Filter credit notes by invoice and a window of issue times."""

    invoice = django_filters.NumberFilter(field_name="invoice_id")
    start = IsoDateTimeFilter(field_name="issued_at", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="issued_at", lookup_expr="lt")

    class Meta:
        model = CreditNote
        fields = ["invoice", "currency"]


class UsageRollupFilter(django_filters.FilterSet):
    """Filter rollups by contract and by a [start, end) window of hours."""

    contract = django_filters.NumberFilter(field_name="contract_id")
    contract_number = django_filters.CharFilter(field_name="contract__number", lookup_expr="iexact")
    start = IsoDateTimeFilter(field_name="hour", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="hour", lookup_expr="lt")
    availability_pct__lt = django_filters.NumberFilter(
        field_name="availability_pct", lookup_expr="lt"
    )

    class Meta:
        model = UsageRollup
        fields = ["contract"]
