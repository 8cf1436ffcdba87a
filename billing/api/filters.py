"""Filters of the billing API: invoices, credit notes, usage rollups and the ledger."""

from __future__ import annotations

import django_filters

from accounts.models import Organization
from billing.models import (
    AccountKind,
    CreditGrant,
    CreditNote,
    FundsAction,
    FundsPolicy,
    GrantKind,
    GrantScope,
    Invoice,
    InvoiceStatus,
    LedgerAccount,
    LedgerEntry,
    TopUp,
    TopUpMethod,
    TopUpStatus,
    TransactionKind,
    UsageRollup,
)
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


class BalanceFilter(django_filters.FilterSet):
    """Filter the caller's ledger accounts by kind and currency."""

    kind = django_filters.MultipleChoiceFilter(choices=AccountKind.choices)
    currency = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = LedgerAccount
        fields = ["kind", "currency"]


class LedgerEntryFilter(django_filters.FilterSet):
    """Filter entries by account, account kind, transaction kind, document and a window of
    effective times ([start, end))."""

    account = django_filters.NumberFilter(field_name="account_id")
    kind = django_filters.MultipleChoiceFilter(
        field_name="account__kind", choices=AccountKind.choices
    )
    transaction_kind = django_filters.MultipleChoiceFilter(
        field_name="transaction__kind", choices=TransactionKind.choices
    )
    currency = django_filters.CharFilter(lookup_expr="iexact")
    invoice = django_filters.NumberFilter(field_name="transaction__invoice_id")
    credit_note = django_filters.NumberFilter(field_name="transaction__credit_note_id")
    start = IsoDateTimeFilter(field_name="transaction__effective_at", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="transaction__effective_at", lookup_expr="lt")

    class Meta:
        model = LedgerEntry
        fields = ["account", "currency"]


class CreditGrantFilter(django_filters.FilterSet):
    """Filter grants by customer, currency, kind, scope and whether they have expired."""

    customer = django_filters.NumberFilter(field_name="customer_id")
    currency = django_filters.CharFilter(lookup_expr="iexact")
    kind = django_filters.MultipleChoiceFilter(choices=GrantKind.choices)
    applies_to = django_filters.MultipleChoiceFilter(choices=GrantScope.choices)
    expired = django_filters.BooleanFilter(
        field_name="expired_at", lookup_expr="isnull", exclude=True
    )

    class Meta:
        model = CreditGrant
        fields = ["customer", "currency", "kind", "applies_to"]


class TopUpFilter(django_filters.FilterSet):
    """Filter top-ups by customer, currency, method and status."""

    customer = django_filters.NumberFilter(field_name="customer_id")
    currency = django_filters.CharFilter(lookup_expr="iexact")
    method = django_filters.MultipleChoiceFilter(choices=TopUpMethod.choices)
    status = django_filters.MultipleChoiceFilter(choices=TopUpStatus.choices)

    class Meta:
        model = TopUp
        fields = ["customer", "currency", "method", "status"]


class FundsPolicyFilter(django_filters.FilterSet):
    """Filter funds policies by contract, action and whether they are triggered."""

    contract = django_filters.NumberFilter(field_name="contract_id")
    action = django_filters.MultipleChoiceFilter(choices=FundsAction.choices)
    triggered = django_filters.BooleanFilter(
        field_name="triggered_at", lookup_expr="isnull", exclude=True
    )

    class Meta:
        model = FundsPolicy
        fields = ["contract", "action"]


class BurnDownFilter(django_filters.FilterSet):
    """Operators: one customer's burn-down (by id or slug)."""

    customer = django_filters.NumberFilter(field_name="pk")
    slug = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = Organization
        fields = ["slug"]
