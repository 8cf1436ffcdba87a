"""Customer funds: credit grants (prepaid and promotional balances), top-ups, and the funds
policies that watch a balance run down (docs/ledger.md, "Prepaid balances and grants").

A grant is one sub-ledger of the customer's `customer_balance` account (`grant:<id>`): the
ledger holds its money, the grant row says where it came from, who vouches for it, what it may
pay for, in which order it is drawn and when it lapses. A top-up is a payment that becomes a
`paid` grant once the money is in. A funds policy is set per contract and acts on the
customer's balance in the contract's currency when it is projected to run out.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from contracts.models import Contract
from core.fields import amount_field, currency_field, currency_is_iso

# The priority of paid money: drawn after promotional credit (lower first) unless said otherwise.
PAID_PRIORITY = 100


class GrantKind(models.TextChoices):
    """Where a grant's money comes from."""

    PAID = "paid", "Paid by the customer (a top-up)"
    PROMOTIONAL = "promotional", "Promotional credit granted by the marketplace"
    RESALE_PROCEEDS = "resale_proceeds", "A reseller's proceeds, paid by its buyer"


class GrantScope(models.TextChoices):
    """Which invoice lines a grant may pay for."""

    ANYTHING = "anything", "Anything on the invoice"
    CARD_HOURS = "card_hours", "Card-hours only"
    TOKENS = "tokens", "Tokens only"


class CreditGrant(models.Model):
    """Money on a customer's balance, drawn down by issued invoices by priority, then expiry.

    Its balance lives in the ledger (sub-ledger `grant:<id>` of `customer_balance`); the row is
    the document behind it and never changes but for its expiry, recorded once.
    """

    customer = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="credit_grants"
    )
    currency = currency_field()
    kind = models.CharField(max_length=16, choices=GrantKind.choices)
    amount = amount_field(help_text="What was granted, in the currency.")
    priority = models.PositiveSmallIntegerField(
        default=PAID_PRIORITY, help_text="Drawn in ascending priority (lower first)."
    )
    applies_to = models.CharField(
        max_length=16, choices=GrantScope.choices, default=GrantScope.ANYTHING
    )
    granted_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField()
    vouched_by = models.CharField(
        max_length=200, help_text="Who vouches for the money: a Stripe payment, an operator."
    )
    actor = models.CharField(max_length=200)
    expired_at = models.DateTimeField(
        null=True, blank=True, help_text="When the unused rest was taken back at its expiry."
    )
    expired_amount = amount_field(default=0, help_text="The unused rest taken back at expiry.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["customer_id", "currency", "priority", "expires_at", "id"]
        indexes = [
            models.Index(fields=["customer", "currency"], name="credit_grant_customer_idx"),
            models.Index(
                fields=["expires_at"],
                condition=Q(expired_at__isnull=True, expires_at__isnull=False),
                name="credit_grant_expiring_idx",
            ),
        ]
        constraints = [
            currency_is_iso("credit_grant_currency_iso"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="credit_grant_amount_positive"),
            models.CheckConstraint(
                condition=Q(kind__in=GrantKind.values), name="credit_grant_kind_known"
            ),
            models.CheckConstraint(
                condition=Q(applies_to__in=GrantScope.values), name="credit_grant_scope_known"
            ),
            # Paid money is the customer's: it never lapses.
            models.CheckConstraint(
                condition=~Q(kind=GrantKind.PAID) | Q(expires_at__isnull=True),
                name="credit_grant_paid_never_expires",
            ),
            models.CheckConstraint(
                condition=Q(expires_at__isnull=True) | Q(expires_at__gt=F("granted_at")),
                name="credit_grant_expires_after_grant",
            ),
            models.CheckConstraint(
                condition=Q(expired_at__isnull=True, expired_amount=0)
                | Q(
                    expired_at__isnull=False,
                    expires_at__isnull=False,
                    expired_amount__gte=0,
                    expired_amount__lte=F("amount"),
                ),
                name="credit_grant_expiry_recorded_once",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="credit_grant_has_reason"),
            models.CheckConstraint(condition=~Q(vouched_by=""), name="credit_grant_vouched"),
            models.CheckConstraint(condition=~Q(actor=""), name="credit_grant_has_actor"),
        ]

    def __str__(self) -> str:
        return f"grant {self.pk}: {self.amount} {self.currency} ({self.kind}) to {self.customer_id}"

    @property
    def subledger(self) -> str:
        return grant_subledger(self.pk)


def grant_subledger(grant_id: int) -> str:
    """The `customer_balance` sub-ledger that holds a grant's money."""
    return f"grant:{grant_id}"


class TopUpMethod(models.TextChoices):
    """How the money of a top-up arrives."""

    STRIPE = "stripe", "Card payment through Stripe"
    RECORDED = "recorded", "Payment received outside Stripe, recorded by an operator"


class TopUpStatus(models.TextChoices):
    """A top-up is pending until the payment succeeds (then it has its grant) or fails."""

    PENDING = "pending", "Pending"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class TopUp(models.Model):
    """A customer's payment onto its prepaid balance; on success it becomes a `paid` grant."""

    customer = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="top_ups")
    currency = currency_field()
    amount = amount_field()
    method = models.CharField(max_length=16, choices=TopUpMethod.choices)
    status = models.CharField(
        max_length=16, choices=TopUpStatus.choices, default=TopUpStatus.PENDING
    )
    payment_method = models.CharField(
        max_length=64, blank=True, help_text="The Stripe payment method charged."
    )
    stripe_payment_intent_id = models.CharField(max_length=64, blank=True)
    reference = models.CharField(
        max_length=200, blank=True, help_text="The bank or processor reference of the payment."
    )
    vouched_by = models.CharField(max_length=200)
    actor = models.CharField(max_length=200)
    requested_at = models.DateTimeField()
    settled_at = models.DateTimeField(null=True, blank=True)
    failure_message = models.CharField(max_length=500, blank=True)
    grant = models.OneToOneField(
        CreditGrant, null=True, blank=True, on_delete=models.PROTECT, related_name="top_up"
    )

    class Meta:
        ordering = ["-requested_at", "-id"]
        constraints = [
            currency_is_iso("top_up_currency_iso"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="top_up_amount_positive"),
            models.CheckConstraint(
                condition=Q(method__in=TopUpMethod.values), name="top_up_method_known"
            ),
            models.CheckConstraint(condition=~Q(vouched_by=""), name="top_up_vouched"),
            models.CheckConstraint(
                condition=Q(status=TopUpStatus.PENDING, settled_at__isnull=True, grant__isnull=True)
                | Q(status=TopUpStatus.SUCCEEDED, settled_at__isnull=False, grant__isnull=False)
                | Q(status=TopUpStatus.FAILED, settled_at__isnull=False, grant__isnull=True),
                name="top_up_status_consistent",
            ),
            models.UniqueConstraint(
                fields=["stripe_payment_intent_id"],
                condition=~Q(stripe_payment_intent_id=""),
                name="top_up_payment_intent_once",
            ),
        ]

    def __str__(self) -> str:
        return f"top-up {self.pk}: {self.amount} {self.currency} ({self.status})"


class FundsAction(models.TextChoices):
    """What a funds policy does when the balance is projected to run out within its days."""

    NOTHING = "nothing", "Nothing"
    WARN = "warn", "Warn (a balance.low event)"
    STOP_NEW = "stop_new", "Warn and stop new leases and holds"
    PAUSE_INTERRUPTIBLE = "pause_interruptible", "Warn and pause interruptible leases"


class FundsPolicy(models.Model):
    """Per contract: what happens when the lessee's balance in its currency runs low.

    `triggered_at` is set while the last evaluation found the balance projected to run out
    within `threshold_days` (and cleared when it no longer is); the admission check reads it.
    """

    contract = models.OneToOneField(Contract, on_delete=models.PROTECT, related_name="funds_policy")
    action = models.CharField(max_length=24, choices=FundsAction.choices)
    threshold_days = models.PositiveSmallIntegerField(
        help_text="Act when the balance is projected to run out within this many days."
    )
    set_by = models.CharField(max_length=200)
    triggered_at = models.DateTimeField(null=True, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    days_left = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "funds policies"
        ordering = ["contract_id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=FundsAction.values), name="funds_policy_action_known"
            ),
            models.CheckConstraint(
                condition=Q(threshold_days__gte=1, threshold_days__lte=365),
                name="funds_policy_days_in_range",
            ),
            models.CheckConstraint(condition=~Q(set_by=""), name="funds_policy_has_setter"),
        ]

    def __str__(self) -> str:
        return f"{self.contract_id}: {self.action} at {self.threshold_days} days"


class FundsAlert(models.Model):
    """One day a policy fired: the projection, what was done, and why in a sentence."""

    policy = models.ForeignKey(FundsPolicy, on_delete=models.PROTECT, related_name="alerts")
    evaluated_on = models.DateField()
    evaluated_at = models.DateTimeField()
    currency = currency_field()
    balance = amount_field()
    daily_burn = amount_field()
    days_left = models.DecimalField(max_digits=10, decimal_places=2)
    runs_out_at = models.DateTimeField(null=True, blank=True)
    action = models.CharField(max_length=24, choices=FundsAction.choices)
    leases_paused = models.PositiveIntegerField(default=0)
    explanation = models.TextField()

    class Meta:
        ordering = ["-evaluated_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["policy", "evaluated_on"], name="funds_alert_once_a_day"
            ),
            currency_is_iso("funds_alert_currency_iso"),
            models.CheckConstraint(condition=~Q(explanation=""), name="funds_alert_explained"),
        ]

    def __str__(self) -> str:
        return f"{self.policy_id} {self.evaluated_on}: {self.days_left} days"
