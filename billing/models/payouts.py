"""Commission and provider payouts (docs/ledger.md, "Commission, statements and payouts").

- `CommissionRate`: the marketplace's percent (and optional minimum per invoice) of a provider's
  share, per provider or per offer; without one, `BILLING_COMMISSION_PCT`.
- `CommissionCharge`: what an invoice's issue charged, and what each credit note gave back —
  the document the ledger's commission entries post and the reconciliation reads.
- `PayoutProfile`: where a provider is paid (a Stripe connected account, or an export file).
- `ProviderStatement`: one provider's month in one currency, from the ledger and documents.
- `Payout`: the money a statement pays, moved pending → submitted → paid (or failed) through
  `PAYOUT_LIFECYCLE`, one `PayoutEvent` per move; at most one per provider, period and currency.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from billing.models.invoices import CreditNote, Invoice
from core.fields import amount_field, currency_field, currency_is_iso
from core.lifecycle import Lifecycle
from leasing.models import Offer


def _pct_field(**kwargs: Any) -> models.DecimalField[Any, Any]:
    """A percentage with four decimals (as invoices' tax rates)."""
    return models.DecimalField(max_digits=7, decimal_places=4, **kwargs)


class CommissionRate(models.Model):
    """The marketplace's commission on a provider's invoices, or on one offer's (which wins)."""

    provider = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="commission_rates"
    )
    offer = models.OneToOneField(
        Offer,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="commission_rate",
        help_text="Empty: the provider's rate for all its invoices.",
    )
    percent = _pct_field(
        validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text="Percent of the provider's pre-tax share of each invoice.",
    )
    minimum = amount_field(
        null=True, blank=True, help_text="Optional minimum commission per invoice."
    )
    minimum_currency = currency_field(blank=True, default="")
    set_by = models.CharField(max_length=200, help_text="The operator who vouched for it.")
    reason = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider_id", "offer_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider"],
                condition=Q(offer__isnull=True),
                name="commission_rate_once_per_provider",
            ),
            models.CheckConstraint(
                condition=Q(percent__gte=0, percent__lte=100), name="commission_percent_range"
            ),
            models.CheckConstraint(
                condition=Q(minimum__isnull=True, minimum_currency="")
                | Q(minimum__gt=0, minimum_currency__regex=r"^[A-Z]{3}$"),
                name="commission_minimum_has_currency",
            ),
            models.CheckConstraint(condition=~Q(set_by=""), name="commission_rate_vouched"),
            models.CheckConstraint(condition=~Q(reason=""), name="commission_rate_has_reason"),
        ]

    def __str__(self) -> str:
        subject = f"offer {self.offer_id}" if self.offer_id else f"provider {self.provider_id}"
        return f"{self.percent} % on {subject}"


class CommissionCharge(models.Model):
    """Commission an invoice's issue charged (positive) or a credit note gave back (negative)."""

    invoice = models.ForeignKey(
        Invoice, on_delete=models.PROTECT, related_name="commission_charges"
    )
    credit_note = models.OneToOneField(
        CreditNote,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="commission_charge",
    )
    provider = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    currency = currency_field()
    base = amount_field(help_text="The provider's pre-tax share it applies to.")
    percent = _pct_field()
    minimum = amount_field(null=True, blank=True)
    source = models.CharField(max_length=32, help_text="offer, provider or default.")
    amount = amount_field()
    explanation = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["invoice_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["invoice"],
                condition=Q(credit_note__isnull=True),
                name="commission_charged_once_per_invoice",
            ),
            currency_is_iso("commission_charge_currency_iso"),
            # A charge never exceeds its base; a credit note's give-back is never positive.
            models.CheckConstraint(
                condition=Q(credit_note__isnull=True, amount__gte=0, amount__lte=F("base"))
                | Q(credit_note__isnull=False, amount__lte=0),
                name="commission_charge_sign",
            ),
        ]

    def __str__(self) -> str:
        return f"commission {self.amount} {self.currency} on invoice {self.invoice_id}"


STRIPE_ACCOUNT_ID = RegexValidator(
    r"^acct_[A-Za-z0-9]+$", message="A Stripe connected account id looks like acct_1A2b3C."
)


class PayoutProfile(models.Model):
    """How a provider is paid: a Stripe connected account, or (empty) an export file."""

    provider = models.OneToOneField(
        Organization, on_delete=models.PROTECT, related_name="payout_profile"
    )
    stripe_account_id = models.CharField(
        max_length=64,
        blank=True,
        validators=[STRIPE_ACCOUNT_ID],
        help_text="acct_…; empty: payouts go to the export file.",
    )
    set_by = models.CharField(max_length=200)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(stripe_account_id="") | Q(stripe_account_id__startswith="acct_"),
                name="payout_profile_stripe_account",
            ),
            models.CheckConstraint(condition=~Q(set_by=""), name="payout_profile_vouched"),
        ]

    def __str__(self) -> str:
        return f"{self.provider_id}: {self.stripe_account_id or 'export'}"


class ProviderStatement(models.Model):
    """One provider's month in one currency: what it billed, what the marketplace kept, and
    what is payable (its collected, available balance as of the period's end)."""

    provider = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="statements")
    currency = currency_field()
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    invoices = models.PositiveIntegerField(help_text="Invoices issued in the period.")
    gross_billed = amount_field(help_text="Pre-tax lines of its invoices but SLA credits.")
    sla_credits = amount_field(help_text="SLA credit lines (a positive amount taken off).")
    refunds = amount_field(help_text="Pre-tax credit notes issued in the period.")
    commission = amount_field(help_text="Commission charged less commission given back.")
    resale_to_sellers = amount_field(
        default=0, help_text="Resale proceeds of its invoices owed to the sellers, less give-backs."
    )
    net_earned = amount_field()
    payable = amount_field(help_text="Collected and available to pay, as of the period's end.")
    pdf = models.FileField(upload_to="statements/%Y/", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=200)

    class Meta:
        ordering = ["-period_start", "provider_id", "currency", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "period_start", "currency"], name="statement_once_per_period"
            ),
            currency_is_iso("statement_currency_iso"),
            models.CheckConstraint(
                condition=Q(period_end__gt=F("period_start")), name="statement_period_order"
            ),
            models.CheckConstraint(
                condition=Q(
                    net_earned=F("gross_billed")
                    - F("sla_credits")
                    - F("refunds")
                    - F("commission")
                    - F("resale_to_sellers")
                ),
                name="statement_net_is_difference",
            ),
            # Nothing to pay, no statement (the run does not make one).
            models.CheckConstraint(condition=Q(payable__gt=0), name="statement_something_payable"),
        ]

    def __str__(self) -> str:
        return f"statement {self.provider_id} {self.period_start:%Y-%m} {self.currency}"


class PayoutStatus(models.TextChoices):
    """Where a payout is: made (money reserved), submitted (transfer or file), paid or failed."""

    PENDING = "pending", "Pending"
    SUBMITTED = "submitted", "Submitted"
    PAID = "paid", "Paid"
    FAILED = "failed", "Failed"


class PayoutMethod(models.TextChoices):
    """How the money leaves: a Stripe transfer to a connected account, or an export file."""

    STRIPE_TRANSFER = "stripe_transfer", "Stripe transfer"
    EXPORT = "export", "Export file (bank transfer by the operator)"


P = PayoutStatus

PAYOUT_TRANSITIONS: dict[str, frozenset[str]] = {
    P.PENDING: frozenset({P.SUBMITTED, P.FAILED}),
    P.SUBMITTED: frozenset({P.PAID, P.FAILED}),
    P.PAID: frozenset(),
    P.FAILED: frozenset(),
}


class Payout(models.Model):
    """The money one statement pays a provider, never more than was payable when it was made."""

    statement = models.OneToOneField(
        ProviderStatement, on_delete=models.PROTECT, related_name="payout"
    )
    provider = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="payouts")
    currency = currency_field()
    period_start = models.DateTimeField()
    amount = amount_field()
    payable = amount_field(help_text="The provider's available balance when it was made.")
    method = models.CharField(max_length=16, choices=PayoutMethod.choices)
    status = models.CharField(max_length=16, choices=PayoutStatus.choices, default=P.PENDING)
    stripe_account_id = models.CharField(max_length=64, blank=True)
    stripe_transfer_id = models.CharField(max_length=64, blank=True)
    export_file = models.FileField(upload_to="payouts/%Y/", blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    failure_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    created_by = models.CharField(max_length=200)

    class Meta:
        ordering = ["-period_start", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "period_start", "currency"], name="payout_once_per_period"
            ),
            currency_is_iso("payout_currency_iso"),
            models.CheckConstraint(
                condition=Q(amount__gt=0, amount__lte=F("payable")),
                name="payout_within_payable",
            ),
            models.CheckConstraint(condition=Q(status__in=P.values), name="payout_status_known"),
            models.CheckConstraint(
                condition=Q(method=PayoutMethod.EXPORT, stripe_account_id="")
                | Q(method=PayoutMethod.STRIPE_TRANSFER, stripe_account_id__startswith="acct_"),
                name="payout_method_destination",
            ),
            # A Stripe payout is submitted exactly when Stripe answered with its transfer.
            models.CheckConstraint(
                condition=Q(method=PayoutMethod.EXPORT, stripe_transfer_id="")
                | Q(method=PayoutMethod.STRIPE_TRANSFER, status=P.PENDING, stripe_transfer_id="")
                | Q(
                    method=PayoutMethod.STRIPE_TRANSFER,
                    status__in=[P.SUBMITTED, P.PAID],
                    stripe_transfer_id__startswith="tr_",
                )
                | Q(method=PayoutMethod.STRIPE_TRANSFER, status=P.FAILED),
                name="payout_transfer_when_submitted",
            ),
            models.CheckConstraint(
                condition=Q(status=P.PAID, paid_at__isnull=False)
                | (~Q(status=P.PAID) & Q(paid_at__isnull=True)),
                name="payout_paid_at_iff_paid",
            ),
            models.CheckConstraint(
                condition=Q(status=P.FAILED, failed_at__isnull=False)
                | (~Q(status=P.FAILED) & Q(failed_at__isnull=True)),
                name="payout_failed_at_iff_failed",
            ),
        ]

    def __str__(self) -> str:
        return f"payout {self.pk}: {self.amount} {self.currency} to {self.provider_id}"


# The only way a payout's status changes (billing.services.payouts); each move writes a
# PayoutEvent row.
PAYOUT_LIFECYCLE: Lifecycle[Payout] = Lifecycle(
    "payout", PAYOUT_TRANSITIONS, error_code="invalid_payout_transition"
)


class PayoutEvent(models.Model):
    """One status change of a payout: from, to, when, who and why."""

    payout = models.ForeignKey(Payout, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=16, choices=PayoutStatus.choices)
    to_status = models.CharField(max_length=16, choices=PayoutStatus.choices)
    effective_at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    explanation = models.TextField()
    inputs = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["effective_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(from_status=F("to_status")), name="payout_event_moves"
            ),
            models.CheckConstraint(condition=~Q(actor=""), name="payout_event_has_actor"),
        ]

    def __str__(self) -> str:
        return f"{self.payout_id} {self.from_status} → {self.to_status}"
