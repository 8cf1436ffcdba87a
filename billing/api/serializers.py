"""Serializers of the billing API: invoices and credit notes, the running period's preview, usage
batches and rollups, the receipt Stripe's webhook gets, and the ledger's balances and entries.

Output only, apart from the usage batch, which documents the body the ingest service validates
with pydantic (billing.schemas). Stored amounts are answered at the currency's minor unit
(core.api.fields.MinorUnitMixin); computed ones are already rounded once.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from billing.models import (
    CreditNote,
    CreditNoteLine,
    Invoice,
    InvoiceLine,
    InvoiceStatus,
    LedgerAccount,
    LedgerEntry,
    LineKind,
    UsageMode,
    UsageRollup,
    UsageStatus,
)
from billing.parties import document_party
from billing.rating import LineDraft
from billing.services.ingest import MAX_EVENTS_PER_BATCH
from contracts.api.serializers import EventRefSerializer
from core.api.fields import MinorUnitMixin, MoneyField
from core.money import round_money
from core.tags import TAGS_HELP

# ---------------------------------------------------------------- invoices


class InvoiceLineSerializer(MinorUnitMixin, serializers.ModelSerializer[InvoiceLine]):
    """One priced line; `inputs` holds the metered facts, `events` the decisions behind it."""

    money_fields = ("amount",)

    events = EventRefSerializer(many=True, read_only=True)

    class Meta:
        model = InvoiceLine
        fields = [
            "position",
            "kind",
            "description",
            "quantity",
            "unit",
            "unit_price",
            "amount",
            "currency",
            "taxable",
            "service_start",
            "service_end",
            "inputs",
            "events",
        ]
        read_only_fields = fields


class PartySerializer(serializers.Serializer[Any]):
    """One party of a document as it prints: legal name and the lines under it."""

    name = serializers.CharField(read_only=True, help_text="Legal name (billing profile).")
    country = serializers.CharField(read_only=True)
    tax_id = serializers.CharField(read_only=True)
    lines = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Address, tax id and billing e-mail, as printed under the name.",
    )


class InvoiceSerializer(MinorUnitMixin, serializers.ModelSerializer[Invoice]):
    """An invoice with its totals and lines; money is a string decimal next to `currency`."""

    money_fields = ("subtotal", "taxable_amount", "tax", "total", "credited_total")

    contract_number = serializers.CharField(source="contract.number", read_only=True)
    issuer_slug = serializers.CharField(source="issuer.slug", read_only=True)
    customer_slug = serializers.CharField(source="customer.slug", read_only=True)
    lessor = serializers.SerializerMethodField(help_text="The issuer as the document shows it.")
    lessee = serializers.SerializerMethodField(help_text="The customer as the document shows it.")
    lines = InvoiceLineSerializer(many=True, read_only=True)
    drawn_from_balance = serializers.SerializerMethodField(
        help_text="What the prepaid balance paid (the `balance_draw` lines), as a positive amount."
    )
    pdf_url = serializers.SerializerMethodField()

    class Meta:
        model = Invoice
        fields = [
            "id",
            "number",
            "status",
            "contract",
            "contract_number",
            "issuer",
            "issuer_slug",
            "customer",
            "customer_slug",
            "lessor",
            "lessee",
            "period_start",
            "period_end",
            "currency",
            "subtotal",
            "taxable_amount",
            "tax_rate_pct",
            "tax",
            "total",
            "credited_total",
            "drawn_from_balance",
            "issued_at",
            "due_at",
            "paid_at",
            "voided_at",
            "emailed_at",
            "rated_at",
            "pdf_url",
            "lines",
        ]
        read_only_fields = fields

    @extend_schema_field(PartySerializer)
    def get_lessor(self, invoice: Invoice) -> dict[str, Any]:
        return PartySerializer(document_party(invoice.issuer)).data

    @extend_schema_field(PartySerializer)
    def get_lessee(self, invoice: Invoice) -> dict[str, Any]:
        return PartySerializer(document_party(invoice.customer)).data

    def get_drawn_from_balance(self, invoice: Invoice) -> str:
        """From the prefetched lines: no query per invoice."""
        drawn = -sum(
            (line.amount for line in invoice.lines.all() if line.kind == LineKind.BALANCE_DRAW),
            Decimal(0),
        )
        return str(round_money(drawn, invoice.currency))

    def get_pdf_url(self, invoice: Invoice) -> str | None:
        """Where to download the PDF (issued invoices only)."""
        if invoice.status == InvoiceStatus.DRAFT:
            return None
        return f"/api/v1/invoices/{invoice.pk}/pdf"


class PreviewLineSerializer(serializers.Serializer[LineDraft]):
    """One line of the running period's preview."""

    kind = serializers.CharField()
    description = serializers.CharField()
    quantity = serializers.DecimalField(max_digits=24, decimal_places=6)
    unit = serializers.CharField()
    unit_price = serializers.DecimalField(max_digits=20, decimal_places=6)
    amount = MoneyField()
    currency = serializers.CharField(source="amount.currency")
    taxable = serializers.BooleanField()
    service_start = serializers.DateTimeField(allow_null=True)
    service_end = serializers.DateTimeField(allow_null=True)


class PreviewSerializer(serializers.Serializer[Any]):
    """The running period rated as if it closed now; nothing is stored or numbered."""

    contract = serializers.IntegerField()
    contract_number = serializers.CharField()
    period_start = serializers.DateTimeField()
    as_of = serializers.DateTimeField()
    currency = serializers.CharField()
    subtotal = MoneyField()
    tax_rate_pct = serializers.DecimalField(max_digits=7, decimal_places=4)
    tax = MoneyField()
    total = MoneyField()
    lines = PreviewLineSerializer(many=True)


class CreditNoteLineSerializer(MinorUnitMixin, serializers.ModelSerializer[CreditNoteLine]):
    """One credited amount, against a line of the invoice or the invoice as a whole."""

    money_fields = ("amount",)

    invoice_line_position = serializers.IntegerField(
        source="invoice_line.position", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = CreditNoteLine
        fields = ["description", "amount", "invoice_line_position"]
        read_only_fields = fields


class CreditNoteSerializer(MinorUnitMixin, serializers.ModelSerializer[CreditNote]):
    """A credit note against an issued invoice."""

    money_fields = ("subtotal", "tax", "total")

    invoice_number = serializers.CharField(source="invoice.number", read_only=True)
    lines = CreditNoteLineSerializer(many=True, read_only=True)

    class Meta:
        model = CreditNote
        fields = [
            "id",
            "number",
            "invoice",
            "invoice_number",
            "issuer",
            "customer",
            "reason",
            "currency",
            "subtotal",
            "tax",
            "total",
            "issued_at",
            "lines",
        ]
        read_only_fields = fields


# ---------------------------------------------------------------- usage


class UsageEventInSerializer(serializers.Serializer[Any]):
    """One usage event (documentation only: the service validates with pydantic)."""

    event_id = serializers.CharField(max_length=128, help_text="Your id; unique per provider.")
    contract = serializers.IntegerField(help_text="Id of a token-SLA contract you are lessor of.")
    occurred_at = serializers.DateTimeField(help_text="ISO 8601 with offset; at most 60 s ahead.")
    input_tokens = serializers.IntegerField(min_value=0)
    output_tokens = serializers.IntegerField(min_value=0)
    status = serializers.ChoiceField(choices=UsageStatus.choices)
    ttft_ms = serializers.FloatField(required=False, allow_null=True, min_value=0)
    e2e_ms = serializers.FloatField(required=False, allow_null=True, min_value=0)
    tpot_ms = serializers.FloatField(required=False, allow_null=True, min_value=0)
    mode = serializers.ChoiceField(
        choices=UsageMode.choices,
        required=False,
        help_text="online (the default) or batch (only on contracts whose offering has a batch"
        " tier; no latency fields needed).",
    )
    cached_input_tokens = serializers.IntegerField(
        min_value=0, required=False, help_text="Of input_tokens, those served from the cache."
    )
    tags = serializers.DictField(child=serializers.CharField(), required=False, help_text=TAGS_HELP)


class UsageBatchInSerializer(serializers.Serializer[Any]):
    """A batch of up to 10,000 events."""

    events = serializers.ListField(
        child=UsageEventInSerializer(), min_length=1, max_length=MAX_EVENTS_PER_BATCH
    )


class ReasonSerializer(serializers.Serializer[Any]):
    """Why an event was rejected."""

    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField(required=False)


class EventResultSerializer(serializers.Serializer[Any]):
    """What became of one event, in request order."""

    index = serializers.IntegerField()
    event_id = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["accepted", "duplicate", "rejected"])
    reason = ReasonSerializer(required=False)


class BatchOutcomeSerializer(serializers.Serializer[Any]):
    """The answer to a batch: counts and one result per event."""

    batch_id = serializers.IntegerField()
    received_at = serializers.DateTimeField()
    accepted = serializers.IntegerField()
    duplicate = serializers.IntegerField()
    rejected = serializers.IntegerField()
    late = serializers.IntegerField(help_text="Accepted events of an already closed period.")
    results = EventResultSerializer(many=True)


class UsageRollupSerializer(serializers.ModelSerializer[UsageRollup]):
    """One contract's usage in one UTC hour."""

    contract_number = serializers.CharField(source="contract.number", read_only=True)
    cache_hit_rate_pct = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="Cached of successful input tokens, in percent (null: no input tokens).",
    )
    batch_share_pct = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="Batch-mode of successful requests, in percent (null: no success).",
    )

    class Meta:
        model = UsageRollup
        fields = [
            "id",
            "contract",
            "contract_number",
            "hour",
            "requests_total",
            "requests_success",
            "requests_timeout",
            "requests_error",
            "requests_rejected",
            "input_tokens_success",
            "output_tokens_success",
            "cached_input_tokens_success",
            "batch_requests_success",
            "batch_input_tokens_success",
            "batch_output_tokens_success",
            "cache_hit_rate_pct",
            "batch_share_pct",
            "ttft_p50_ms",
            "ttft_p95_ms",
            "ttft_p99_ms",
            "e2e_p50_ms",
            "e2e_p95_ms",
            "e2e_p99_ms",
            "tpot_p50_ms",
            "tpot_p95_ms",
            "tpot_p99_ms",
            "availability_pct",
            "late_events",
            "refreshed_at",
        ]
        read_only_fields = fields


# ---------------------------------------------------------------- Stripe


class WebhookReceiptSerializer(serializers.Serializer[Any]):
    """The answer Stripe gets: the event was recorded (now, or before if a replay)."""

    received = serializers.BooleanField()
    event_id = serializers.CharField()
    replay = serializers.BooleanField(help_text="True if this event id had been received before.")


# ---------------------------------------------------------------- ledger


class BalanceSerializer(MinorUnitMixin, serializers.ModelSerializer[LedgerAccount]):
    """One ledger account and its balance: signed, a debit positive (see `normal_side`)."""

    money_fields = ("balance",)

    normal_side = serializers.CharField(read_only=True)

    class Meta:
        model = LedgerAccount
        fields = [
            "id",
            "organization",
            "kind",
            "subledger",
            "currency",
            "normal_side",
            "balance",
            "created_at",
        ]
        read_only_fields = fields


class LedgerEntrySerializer(MinorUnitMixin, serializers.ModelSerializer[LedgerEntry]):
    """One entry on one of the caller's accounts, with the transaction and document behind it."""

    money_fields = ("amount",)

    account_kind = serializers.CharField(source="account.kind", read_only=True)
    transaction_kind = serializers.CharField(source="transaction.kind", read_only=True)
    effective_at = serializers.DateTimeField(source="transaction.effective_at", read_only=True)
    posted_at = serializers.DateTimeField(source="transaction.posted_at", read_only=True)
    explanation = serializers.CharField(source="transaction.explanation", read_only=True)
    invoice = serializers.IntegerField(
        source="transaction.invoice_id", read_only=True, allow_null=True
    )
    credit_note = serializers.IntegerField(
        source="transaction.credit_note_id", read_only=True, allow_null=True
    )
    refund = serializers.IntegerField(
        source="transaction.refund_id", read_only=True, allow_null=True
    )
    payout = serializers.IntegerField(
        source="transaction.payout_id", read_only=True, allow_null=True
    )
    credit_grant = serializers.IntegerField(
        source="transaction.credit_grant_id", read_only=True, allow_null=True
    )
    reverses = serializers.IntegerField(
        source="transaction.reverses_id", read_only=True, allow_null=True
    )

    class Meta:
        model = LedgerEntry
        fields = [
            "id",
            "transaction",
            "transaction_kind",
            "effective_at",
            "posted_at",
            "account",
            "account_kind",
            "currency",
            "amount",
            "memo",
            "invoice",
            "invoice_line",
            "credit_note",
            "refund",
            "payout",
            "credit_grant",
            "reverses",
            "explanation",
        ]
        read_only_fields = fields


LEDGER_ENTRY_CSV_FIELDS = tuple(LedgerEntrySerializer.Meta.fields)
BALANCE_CSV_FIELDS = tuple(BalanceSerializer.Meta.fields)
