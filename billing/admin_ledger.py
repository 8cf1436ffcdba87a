"""Ledger admin: accounts with their balances, transactions with their entries, entries — all
read-only. The ledger is written by the posting services only; a correction is a reversing
transaction, never an edit (the database refuses edits anyway)."""

from __future__ import annotations

from django.contrib import admin

from billing.admin import ReadOnlyAdmin, ReadOnlyMixin
from billing.models import LedgerAccount, LedgerEntry, LedgerTransaction, Refund, ResaleProceeds


@admin.register(LedgerAccount)
class LedgerAccountAdmin(ReadOnlyAdmin):
    """One account per owner, currency, kind and sub-ledger, with its trigger-kept balance."""

    list_display = ["id", "organization", "kind", "subledger", "currency", "balance", "created_at"]
    list_filter = ["kind", "currency"]
    list_select_related = ["organization"]
    search_fields = ["organization__name", "organization__slug", "subledger"]


class LedgerEntryInline(ReadOnlyMixin, admin.TabularInline[LedgerEntry, LedgerTransaction]):
    model = LedgerEntry
    fields = readonly_fields = ("account", "currency", "amount", "memo", "invoice_line")
    extra = 0


@admin.register(LedgerTransaction)
class LedgerTransactionAdmin(ReadOnlyAdmin):
    """A posted money event: the document behind it, why, and its balanced entries."""

    list_display = [
        "id",
        "kind",
        "dedupe_key",
        "effective_at",
        "invoice",
        "credit_note",
        "refund",
        "payout",
        "credit_grant",
        "actor",
    ]
    list_filter = ["kind"]
    list_select_related = ["invoice", "credit_note", "refund", "payout", "credit_grant"]
    search_fields = ["dedupe_key", "invoice__number", "credit_note__number", "explanation"]
    date_hierarchy = "effective_at"
    inlines = [LedgerEntryInline]


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    """Every entry, by account: what moved, when and under which transaction."""

    list_display = ["id", "transaction", "account", "currency", "amount", "memo"]
    list_filter = ["account__kind", "currency"]
    list_select_related = ["transaction", "account__organization"]
    search_fields = ["transaction__dedupe_key", "memo", "account__organization__slug"]


@admin.register(Refund)
class RefundAdmin(ReadOnlyAdmin):
    """Refunds of customers' credit (recorded with `manage.py ledger_refund`), never edited."""

    list_display = ["id", "customer", "amount", "currency", "refunded_at", "actor", "reason"]
    list_filter = ["currency"]
    list_select_related = ["customer"]
    search_fields = ["customer__slug", "customer__name", "reason"]


@admin.register(ResaleProceeds)
class ResaleProceedsAdmin(ReadOnlyAdmin):
    """Splits of sublease invoices and credit notes' give-backs (made by their postings)."""

    list_display = [
        "id",
        "invoice",
        "credit_note",
        "listing",
        "seller",
        "provider",
        "currency",
        "base",
        "fee",
        "provider_share",
        "seller_amount",
        "grant",
        "from_grant",
    ]
    list_filter = ["currency"]
    list_select_related = ["invoice", "credit_note", "seller", "provider", "grant"]
    search_fields = ["invoice__number", "seller__slug", "provider__slug", "explanation"]
