"""The double-entry ledger: accounts, transactions and their entries (docs/ledger.md).

The database holds the invariants (billing migration 0011): every transaction balances per
currency at commit (L1, a deferred constraint trigger), an entry's currency is its account's
(L2, a composite foreign key), entries and transactions are never updated or deleted (L3,
triggers), a document event is posted once (L4, unique `dedupe_key` and `reverses`), and the
accounts that hold customer or payable money never go negative (L5/L6, a check on the
trigger-kept `balance`). Amounts are signed: a debit is positive, a credit negative.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from accounts.models import Organization
from billing.models.invoices import CreditNote, Invoice, InvoiceLine
from core.fields import amount_field, currency_field, currency_is_iso


class AccountKind(models.TextChoices):
    """What an account holds; the owner and the normal side follow from the kind."""

    CUSTOMER_RECEIVABLE = "customer_receivable", "Customer receivable"
    CUSTOMER_PREPAID_OUTSIDE = "customer_prepaid_outside", "Customer prepayment paid outside"
    CUSTOMER_BALANCE = "customer_balance", "Customer prepaid balance"
    CUSTOMER_DEPOSIT = "customer_deposit", "Customer deposit held"
    PROVIDER_PENDING = "provider_pending", "Provider share, not yet collected"
    PROVIDER_AVAILABLE = "provider_available", "Provider share, collected and payable"
    PROVIDER_TAX = "provider_tax", "Tax on the provider's invoices"
    RESELLER_PENDING = "reseller_pending", "Resale proceeds, not yet collected"
    COMMISSION = "commission", "Marketplace commission revenue"
    PROMOTIONS = "promotions", "Promotional credit granted"
    CASH = "cash", "Cash at the payment processor"
    PAYOUTS_IN_TRANSIT = "payouts_in_transit", "Payouts in transit"


K = AccountKind

# The marketplace's own accounts have no organization (organization IS NULL is the marketplace).
MARKETPLACE_KINDS = frozenset({K.COMMISSION, K.PROMOTIONS, K.CASH, K.PAYOUTS_IN_TRANSIT})
# Kinds whose natural balance is a debit; every other kind is credit-normal.
DEBIT_NORMAL_KINDS = frozenset(
    {K.CUSTOMER_RECEIVABLE, K.CUSTOMER_PREPAID_OUTSIDE, K.PROMOTIONS, K.CASH}
)
# Customer money and what is payable never go negative (L5, L6). All of them are credit-normal,
# so "never negative" is a signed balance that never rises above zero.
NON_NEGATIVE_KINDS = frozenset({K.CUSTOMER_BALANCE, K.CUSTOMER_DEPOSIT, K.PROVIDER_AVAILABLE})


class LedgerAccount(models.Model):
    """One account of an organization (or of the marketplace) in one currency and kind.

    `balance` is the signed sum of the account's entries (debit positive), kept by a trigger on
    entry insert and never written by Python.
    """

    organization = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ledger_accounts",
        help_text="Empty for the marketplace's own accounts.",
    )
    currency = currency_field()
    kind = models.CharField(max_length=32, choices=AccountKind.choices)
    subledger = models.CharField(
        max_length=64, blank=True, default="", help_text="Empty for the kind's main account."
    )
    may_go_negative = models.BooleanField(editable=False)
    balance = amount_field(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["organization_id", "currency", "kind", "subledger", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "currency", "kind", "subledger"],
                nulls_distinct=False,
                name="ledger_account_once",
            ),
            # The target of the entries' composite foreign key (L2).
            models.UniqueConstraint(fields=["id", "currency"], name="ledger_account_id_currency"),
            currency_is_iso("ledger_account_currency_iso"),
            models.CheckConstraint(
                condition=Q(kind__in=AccountKind.values), name="ledger_account_kind_known"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=sorted(MARKETPLACE_KINDS), organization__isnull=True)
                | (~Q(kind__in=sorted(MARKETPLACE_KINDS)) & Q(organization__isnull=False)),
                name="ledger_account_owner_by_kind",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=sorted(NON_NEGATIVE_KINDS), may_go_negative=False)
                | (~Q(kind__in=sorted(NON_NEGATIVE_KINDS)) & Q(may_go_negative=True)),
                name="ledger_account_negative_by_kind",
            ),
            models.CheckConstraint(
                condition=Q(may_go_negative=True) | Q(balance__lte=0),
                name="ledger_account_never_negative",
            ),
        ]

    def __str__(self) -> str:
        owner = self.organization_id if self.organization_id is not None else "marketplace"
        sub = f":{self.subledger}" if self.subledger else ""
        return f"{owner} {self.kind}{sub} {self.currency}"

    @property
    def normal_side(self) -> str:
        return "debit" if self.kind in DEBIT_NORMAL_KINDS else "credit"


class TransactionKind(models.TextChoices):
    """Which money event a transaction posts."""

    INVOICE_ISSUED = "invoice_issued", "Invoice issued"
    INVOICE_PAID = "invoice_paid", "Invoice paid"
    INVOICE_VOIDED = "invoice_voided", "Invoice voided (reversal)"
    CREDIT_NOTE_ISSUED = "credit_note_issued", "Credit note issued"
    REFUND_ISSUED = "refund_issued", "Refund paid out"
    PAYOUT_SENT = "payout_sent", "Payout made (payable to in transit)"
    PAYOUT_PAID = "payout_paid", "Payout paid (in transit to cash)"
    PAYOUT_FAILED = "payout_failed", "Payout failed (reversal)"
    TOP_UP_RECEIVED = "top_up_received", "Top-up received"
    GRANT_ISSUED = "grant_issued", "Promotional credit granted"
    GRANT_EXPIRED = "grant_expired", "Grant expired (unused rest taken back)"
    DEPOSIT_HELD = "deposit_held", "Deposit held (balance to deposit)"
    DEPOSIT_RELEASED = "deposit_released", "Deposit released (deposit to balance)"
    RESALE_PROCEEDS_PAID = "resale_proceeds_paid", "Resale proceeds paid to the seller's balance"


class Refund(models.Model):
    """Money paid back to a customer out of its credit (what credit notes left it owed)."""

    customer = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="refunds")
    currency = currency_field()
    amount = amount_field()
    reason = models.TextField()
    refunded_at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-refunded_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="refund_amount_positive"),
            models.CheckConstraint(condition=~Q(reason=""), name="refund_has_reason"),
            currency_is_iso("refund_currency_iso"),
        ]

    def __str__(self) -> str:
        return f"refund {self.pk}: {self.amount} {self.currency} to {self.customer_id}"


class LedgerTransaction(models.Model):
    """One money event, posted once: balanced entries, the document behind them and why."""

    kind = models.CharField(max_length=32, choices=TransactionKind.choices)
    effective_at = models.DateTimeField(help_text="When the event happened.")
    posted_at = models.DateTimeField(auto_now_add=True)
    explanation = models.TextField()
    inputs = models.JSONField(default=dict, blank=True)
    dedupe_key = models.CharField(max_length=128, unique=True)
    invoice = models.ForeignKey(
        Invoice, null=True, blank=True, on_delete=models.PROTECT, related_name="ledger_postings"
    )
    credit_note = models.ForeignKey(
        CreditNote,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ledger_postings",
    )
    refund = models.ForeignKey(
        Refund, null=True, blank=True, on_delete=models.PROTECT, related_name="ledger_postings"
    )
    payout = models.ForeignKey(
        "billing.Payout",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ledger_postings",
    )
    credit_grant = models.ForeignKey(
        "billing.CreditGrant",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ledger_postings",
    )
    reverses = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="reversed_by"
    )
    actor = models.CharField(max_length=200)

    class Meta:
        ordering = ["effective_at", "id"]
        indexes = [
            models.Index(fields=["invoice", "kind"], name="ledger_tx_invoice_idx"),
            models.Index(fields=["effective_at"], name="ledger_tx_effective_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=TransactionKind.values), name="ledger_tx_kind_known"
            ),
            models.CheckConstraint(condition=~Q(explanation=""), name="ledger_tx_explained"),
            models.CheckConstraint(condition=~Q(actor=""), name="ledger_tx_has_actor"),
            models.CheckConstraint(condition=~Q(dedupe_key=""), name="ledger_tx_has_dedupe_key"),
            models.CheckConstraint(
                condition=~Q(reverses=models.F("id")), name="ledger_tx_not_self_reversing"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.dedupe_key}"


class LedgerEntry(models.Model):
    """One side of a transaction on one account: a signed amount (debit positive, never 0)."""

    transaction = models.ForeignKey(
        LedgerTransaction, on_delete=models.PROTECT, related_name="entries"
    )
    account = models.ForeignKey(LedgerAccount, on_delete=models.PROTECT, related_name="entries")
    currency = currency_field()
    amount = amount_field()
    memo = models.CharField(max_length=200, blank=True)
    invoice_line = models.ForeignKey(
        InvoiceLine,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ledger_entries",
    )

    class Meta:
        ordering = ["transaction_id", "id"]
        verbose_name_plural = "ledger entries"
        indexes = [models.Index(fields=["account", "id"], name="ledger_entry_account_idx")]
        constraints = [
            models.CheckConstraint(condition=~Q(amount=0), name="ledger_entry_not_zero"),
            currency_is_iso("ledger_entry_currency_iso"),
        ]

    def __str__(self) -> str:
        return f"{self.account} {self.amount}"
