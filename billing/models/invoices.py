"""Invoices, their lines and status history, credit notes, gapless numbering, billing-run logs
and Stripe records."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from contracts.models import Contract, ContractEvent
from core.fields import amount_field, currency_field, currency_is_iso, quantity_field, rate_field
from core.lifecycle import Lifecycle


class InvoiceStatus(models.TextChoices):
    """Where an invoice is in its life; a finalized invoice never changes its lines."""

    DRAFT = "draft", "Draft"
    FINALIZED = "finalized", "Finalized"
    SENT = "sent", "Sent"
    PAID = "paid", "Paid"
    VOID = "void", "Void"
    UNCOLLECTIBLE = "uncollectible", "Uncollectible"


S = InvoiceStatus

# The one map of allowed invoice transitions.
INVOICE_TRANSITIONS: dict[str, frozenset[str]] = {
    S.DRAFT: frozenset({S.FINALIZED}),
    S.FINALIZED: frozenset({S.SENT, S.PAID, S.VOID, S.UNCOLLECTIBLE}),
    S.SENT: frozenset({S.PAID, S.VOID, S.UNCOLLECTIBLE}),
    S.UNCOLLECTIBLE: frozenset({S.PAID, S.VOID}),
    S.PAID: frozenset(),
    S.VOID: frozenset(),
}

# Statuses whose numbers and lines are fixed.
ISSUED_STATUSES = frozenset({S.FINALIZED, S.SENT, S.PAID, S.UNCOLLECTIBLE})


class LineKind(models.TextChoices):
    """What an invoice line charges or credits."""

    CARD_HOURS = "card_hours", "Card-hours"
    NODE_RENT = "node_rent", "Whole-server monthly rent"
    INPUT_TOKENS = "input_tokens", "Input tokens"
    OUTPUT_TOKENS = "output_tokens", "Output tokens"
    CACHED_INPUT_TOKENS = "cached_input_tokens", "Cached input tokens"
    BATCH_INPUT_TOKENS = "batch_input_tokens", "Batch input tokens"
    BATCH_OUTPUT_TOKENS = "batch_output_tokens", "Batch output tokens"
    LATE_INPUT_TOKENS = "late_input_tokens", "Late input tokens (earlier period)"
    LATE_OUTPUT_TOKENS = "late_output_tokens", "Late output tokens (earlier period)"
    LATE_CACHED_INPUT_TOKENS = "late_cached_input_tokens", "Late cached input tokens"
    LATE_BATCH_INPUT_TOKENS = "late_batch_input_tokens", "Late batch input tokens"
    LATE_BATCH_OUTPUT_TOKENS = "late_batch_output_tokens", "Late batch output tokens"
    SLA_CREDIT = "sla_credit", "SLA credit"
    EXIT_FEE = "exit_fee", "Early-termination fee"
    TRUE_UP = "true_up", "Minimum-commitment true-up"
    PREPAYMENT_DRAW = "prepayment_draw", "Paid from prepayment"
    DEPOSIT_RETURN = "deposit_return", "Deposit returned"
    BALANCE_DRAW = "balance_draw", "Paid from the prepaid balance"


class NumberSeries(models.TextChoices):
    """Documents numbered in their own gapless series."""

    INVOICE = "invoice", "Invoice"
    CREDIT_NOTE = "credit_note", "Credit note"


class DocumentSequence(models.Model):
    """The last number used per issuer, series and year; locked to hand out the next one."""

    issuer = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    series = models.CharField(max_length=16, choices=NumberSeries.choices)
    year = models.PositiveSmallIntegerField()
    last_number = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "series", "year"], name="document_sequence_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.issuer_id} {self.series} {self.year}: {self.last_number}"


class Invoice(models.Model):
    """One contract's bill for one billing period: header, totals and delivery state."""

    contract = models.ForeignKey(Contract, on_delete=models.PROTECT, related_name="invoices")
    issuer = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="invoices_issued"
    )
    customer = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="invoices_received"
    )
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    currency = currency_field()
    status = models.CharField(max_length=16, choices=InvoiceStatus.choices, default=S.DRAFT)
    number = models.CharField(max_length=40, null=True, blank=True, unique=True)
    sequence_year = models.PositiveSmallIntegerField(null=True, blank=True)
    sequence_number = models.PositiveIntegerField(null=True, blank=True)
    subtotal = amount_field(default=0)
    tax_rate_pct = models.DecimalField(max_digits=7, decimal_places=4, default=0)
    taxable_amount = amount_field(default=0)
    tax = amount_field(default=0)
    total = amount_field(default=0)
    credited_total = amount_field(
        default=0, help_text="Sum of the credit notes issued against this invoice."
    )
    issued_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    rated_at = models.DateTimeField(help_text="When the lines were last computed.")
    pdf = models.FileField(upload_to="invoices/%Y/", blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)
    emailed_to = models.JSONField(default=list, blank=True)
    stripe_invoice_id = models.CharField(max_length=64, blank=True)
    stripe_pushed_at = models.DateTimeField(null=True, blank=True)
    payment_failed_at = models.DateTimeField(null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-period_start", "-id"]
        indexes = [
            models.Index(fields=["status"], name="invoice_status_idx"),
            models.Index(fields=["customer", "period_start"], name="invoice_customer_idx"),
            models.Index(fields=["issuer", "period_start"], name="invoice_issuer_idx"),
        ]
        constraints = [
            # One live invoice per contract and period; a void one makes room for its reissue.
            models.UniqueConstraint(
                fields=["contract", "period_start"],
                condition=~Q(status=S.VOID),
                name="invoice_one_per_contract_period",
            ),
            models.UniqueConstraint(
                fields=["issuer", "sequence_year", "sequence_number"],
                name="invoice_number_once_per_issuer_year",
            ),
            models.CheckConstraint(
                condition=Q(period_end__gt=F("period_start")), name="invoice_period_order"
            ),
            currency_is_iso("invoice_currency_iso"),
            models.CheckConstraint(
                condition=Q(total=F("subtotal") + F("tax")), name="invoice_total_is_sum"
            ),
            models.CheckConstraint(
                condition=Q(credited_total=0)
                | Q(credited_total__gt=0, credited_total__lte=F("total")),
                name="invoice_credit_within_total",
            ),
            # Drafts carry no number; every issued or voided invoice does.
            models.CheckConstraint(
                condition=(
                    Q(status=S.DRAFT, number__isnull=True, sequence_number__isnull=True)
                    | (
                        ~Q(status=S.DRAFT)
                        & Q(number__isnull=False, sequence_number__isnull=False)
                        & Q(issued_at__isnull=False, due_at__isnull=False)
                    )
                ),
                name="invoice_number_iff_issued",
            ),
        ]

    def __str__(self) -> str:
        return self.number or f"draft {self.pk} ({self.contract_id})"

    @property
    def is_draft(self) -> bool:
        return self.status == S.DRAFT


# The only way an invoice's status changes (billing.services.documents); each move writes one
# InvoiceEvent row.
INVOICE_LIFECYCLE: Lifecycle[Invoice] = Lifecycle(
    "invoice", INVOICE_TRANSITIONS, error_code="invalid_invoice_transition"
)


class InvoiceEvent(models.Model):
    """One status change of an invoice: from, to, when, who, and why in a sentence."""

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=16, choices=InvoiceStatus.choices)
    to_status = models.CharField(max_length=16, choices=InvoiceStatus.choices)
    effective_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    actor = models.CharField(max_length=200, help_text="Who or what changed it.")
    explanation = models.TextField()
    inputs = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["effective_at", "id"]
        indexes = [models.Index(fields=["invoice", "effective_at"], name="invoice_event_idx")]
        constraints = [
            models.CheckConstraint(
                condition=~Q(from_status=F("to_status")), name="invoice_event_moves"
            ),
            models.CheckConstraint(
                condition=Q(from_status__in=InvoiceStatus.values)
                & Q(to_status__in=InvoiceStatus.values),
                name="invoice_event_statuses_known",
            ),
            models.CheckConstraint(condition=~Q(actor=""), name="invoice_event_has_actor"),
            models.CheckConstraint(condition=~Q(explanation=""), name="invoice_event_explained"),
        ]

    def __str__(self) -> str:
        return f"{self.invoice} {self.from_status} → {self.to_status}"


class InvoiceLine(models.Model):
    """One priced quantity on an invoice, traceable to usage and to contract events."""

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=24, choices=LineKind.choices)
    description = models.TextField()
    quantity = quantity_field()
    unit = models.CharField(max_length=32)
    unit_price = rate_field()
    amount = amount_field()
    currency = currency_field()
    taxable = models.BooleanField(default=True)
    service_start = models.DateTimeField(null=True, blank=True)
    service_end = models.DateTimeField(null=True, blank=True)
    inputs = models.JSONField(
        default=dict, blank=True, help_text="The metered facts behind the line (explainable)."
    )
    events = models.ManyToManyField(ContractEvent, blank=True, related_name="invoice_lines")

    class Meta:
        ordering = ["invoice", "position"]
        constraints = [
            models.UniqueConstraint(fields=["invoice", "position"], name="invoice_line_position"),
            currency_is_iso("invoice_line_currency_iso"),
        ]

    def __str__(self) -> str:
        return f"{self.invoice} #{self.position} {self.kind} {self.amount} {self.currency}"


class CreditNote(models.Model):
    """A correction of an issued invoice: an amount given back, numbered in its own series."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="credit_notes")
    issuer = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    customer = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    number = models.CharField(max_length=40, unique=True)
    sequence_year = models.PositiveSmallIntegerField()
    sequence_number = models.PositiveIntegerField()
    reason = models.TextField()
    currency = currency_field()
    subtotal = amount_field()
    tax = amount_field()
    total = amount_field()
    issued_at = models.DateTimeField()
    issued_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-issued_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "sequence_year", "sequence_number"],
                name="credit_note_number_once_per_issuer_year",
            ),
            models.CheckConstraint(condition=Q(total__gt=0), name="credit_note_total_positive"),
            models.CheckConstraint(
                condition=Q(total=F("subtotal") + F("tax")), name="credit_note_total_is_sum"
            ),
        ]

    def __str__(self) -> str:
        return self.number


class CreditNoteLine(models.Model):
    """One credited amount, optionally against one line of the invoice."""

    credit_note = models.ForeignKey(CreditNote, on_delete=models.CASCADE, related_name="lines")
    invoice_line = models.ForeignKey(
        InvoiceLine, null=True, blank=True, on_delete=models.PROTECT, related_name="credits"
    )
    description = models.TextField()
    amount = amount_field()

    class Meta:
        ordering = ["credit_note", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="credit_note_line_positive")
        ]

    def __str__(self) -> str:
        return f"{self.credit_note} {self.amount}"


class BillingRunKind(models.TextChoices):
    """Which job a billing-run row logs."""

    CYCLE = "cycle", "Billing cycle"
    DELIVERY = "delivery", "Invoice delivery"
    RECONCILIATION = "reconciliation", "Usage reconciliation"
    LEDGER = "ledger", "Ledger reconciliation"


class BillingRunOutcome(models.TextChoices):
    """How a billing run ended: still running, completed, or abandoned by a killed worker."""

    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    ABANDONED = "abandoned", "Abandoned"


class BillingRun(models.Model):
    """A log row per billing job run: what it looked at, what it made, what failed.

    The counts and the summary are written in the transaction of each invoice, so a run whose
    worker was killed still says what it committed; past BILLING_RUN_TIMEOUT_MINUTES an open run
    is marked abandoned, and the next run of its kind names it in `picked_up_from`.
    """

    kind = models.CharField(max_length=16, choices=BillingRunKind.choices)
    outcome = models.CharField(
        max_length=16, choices=BillingRunOutcome.choices, default=BillingRunOutcome.RUNNING
    )
    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(
        null=True, blank=True, help_text="When it completed, or when it was marked abandoned."
    )
    as_of = models.DateTimeField(help_text="The clock the run billed against.")
    drafts_created = models.PositiveIntegerField(default=0)
    drafts_refreshed = models.PositiveIntegerField(default=0)
    finalized = models.PositiveIntegerField(default=0)
    delivered = models.PositiveIntegerField(default=0)
    failures = models.JSONField(default=list, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    picked_up = models.PositiveIntegerField(
        default=0,
        help_text="Invoices of this run's work that abandoned runs of its kind had been due to do.",
    )
    picked_up_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="picked_up_from",
        help_text="The run of the same kind that took over the work of this abandoned run.",
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            # Open exactly while running: a completed or abandoned run says when.
            models.CheckConstraint(
                condition=(Q(outcome=BillingRunOutcome.RUNNING) & Q(finished_at__isnull=True))
                | (
                    Q(outcome__in=[BillingRunOutcome.COMPLETED, BillingRunOutcome.ABANDONED])
                    & Q(finished_at__isnull=False)
                ),
                name="billing_run_outcome_matches_finished_at",
            ),
            models.CheckConstraint(
                condition=Q(picked_up_by__isnull=True) | Q(outcome=BillingRunOutcome.ABANDONED),
                name="billing_run_picked_up_only_when_abandoned",
            ),
            models.CheckConstraint(
                condition=~Q(picked_up_by=F("pk")), name="billing_run_not_picked_up_by_itself"
            ),
        ]
        indexes = [
            # The timeout's sweep looks only at open runs.
            models.Index(
                fields=["kind", "started_at"],
                condition=Q(outcome=BillingRunOutcome.RUNNING),
                name="billing_run_open_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.pk} @ {self.started_at:%Y-%m-%d %H:%M}"


class StripeCustomer(models.Model):
    """The Stripe customer that stands for one of our organizations."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, related_name="stripe_customer"
    )
    stripe_id = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.stripe_id


class StripeEvent(models.Model):
    """A Stripe webhook event, recorded once by its id: a replay finds it and does nothing."""

    event_id = models.CharField(max_length=128, unique=True)
    type = models.CharField(max_length=64)
    invoice = models.ForeignKey(
        Invoice, null=True, blank=True, on_delete=models.SET_NULL, related_name="stripe_events"
    )
    outcome = models.CharField(max_length=200, blank=True)
    payload = models.JSONField(default=dict)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at", "-id"]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"
