"""Budgets of customer organizations (per organization, contract or cost tag) with the months
they were evaluated for and the thresholds crossed; usage alert rules over the hourly rollups and
the alerts they fired. Evaluation: billing.services.budgets and billing.services.usage_alerts."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from contracts.models import Contract
from core.fields import amount_field, currency_field, currency_is_iso
from core.tags import KEY_PATTERN, VALUE_PATTERN

# The action of a budget is taken at this percent of its amount; it is always one of its thresholds.
ACTION_PCT = 100


class BudgetAction(models.TextChoices):
    """What happens when a month's spend reaches 100 % of the budget."""

    ALERT = "alert", "Alert only"
    BLOCK = "block", "Block new leases and holds"
    PAUSE = "pause_interruptible", "Pause interruptible leases"


class Budget(models.Model):
    """A monthly spending limit of a customer organization over all its contracts, one contract,
    or the contracts carrying one cost tag (tag_key = tag_value), in one currency."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="budgets")
    name = models.CharField(max_length=100)
    contract = models.ForeignKey(
        Contract,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="budgets",
        help_text="Only this contract's spend (the organization must be its lessee).",
    )
    tag_key = models.CharField(max_length=64, null=True, blank=True)
    tag_value = models.CharField(max_length=200, null=True, blank=True)
    amount = amount_field(help_text="Per calendar month (UTC), in `currency`.")
    currency = currency_field()
    thresholds = ArrayField(
        models.PositiveSmallIntegerField(),
        help_text="Percents of the amount, ascending; 100 (the action's point) is always one.",
    )
    action = models.CharField(max_length=24, choices=BudgetAction.choices)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="budget_amount_positive"),
            currency_is_iso("budget_currency_iso"),
            models.CheckConstraint(
                condition=Q(thresholds__contains=[ACTION_PCT]) & Q(thresholds__len__lte=10),
                name="budget_thresholds_hold_100",
            ),
            models.CheckConstraint(
                condition=Q(tag_key__isnull=True, tag_value__isnull=True)
                | Q(tag_key__isnull=False, tag_value__isnull=False, contract__isnull=True),
                name="budget_one_scope",
            ),
            models.CheckConstraint(
                condition=Q(action__in=BudgetAction.values), name="budget_action_known"
            ),
            # The same rules as the tags of leases, holds and usage (core.tags), so a tag budget
            # always names a key and value that work could carry.
            models.CheckConstraint(
                condition=Q(tag_key__isnull=True)
                | Q(tag_key__regex=KEY_PATTERN, tag_value__regex=VALUE_PATTERN),
                name="budget_tag_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.amount} {self.currency}/month, {self.organization})"

    @property
    def scope(self) -> str:
        """organization, contract or tag."""
        if self.contract_id is not None:
            return "contract"
        if self.tag_key is not None:
            return "tag"
        return "organization"


class BudgetMonth(models.Model):
    """A budget's spend in one calendar month as last evaluated (billing.selectors.spend)."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="months")
    month = models.DateField(help_text="First day of the UTC month.")
    spend = amount_field()
    evaluated_at = models.DateTimeField()

    class Meta:
        ordering = ["-month", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["budget", "month"], name="budget_month_once"),
            models.CheckConstraint(condition=Q(month__day=1), name="budget_month_first_day"),
        ]

    def __str__(self) -> str:
        return f"{self.budget_id} {self.month:%Y-%m}: {self.spend}"


class BudgetCrossing(models.Model):
    """A threshold a budget's monthly spend crossed: once per budget, month and threshold."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="crossings")
    month = models.DateField(help_text="First day of the UTC month.")
    threshold_pct = models.PositiveSmallIntegerField()
    spend = amount_field()
    amount = amount_field(help_text="The budget's amount when it was crossed.")
    currency = currency_field()
    action = models.CharField(max_length=24, choices=BudgetAction.choices)
    crossed_at = models.DateTimeField()
    explanation = models.TextField()

    class Meta:
        ordering = ["-crossed_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "month", "threshold_pct"], name="budget_crossing_once"
            ),
            models.CheckConstraint(condition=Q(month__day=1), name="budget_crossing_first_day"),
            models.CheckConstraint(
                condition=Q(spend__gte=F("amount") * F("threshold_pct") / 100),
                name="budget_crossing_spend_reached",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.budget_id} {self.month:%Y-%m} {self.threshold_pct} %"


class UsageAlertKind(models.TextChoices):
    """What a usage alert rule watches in the hourly rollups of token-SLA contracts."""

    TTFT_P95_OVER_SLO = "ttft_p95_over_slo", "TTFT p95 over the SLO"
    ERROR_RATE_OVER = "error_rate_over", "Error rate over a threshold"
    THROUGHPUT_UNDER_COMMITMENT = "throughput_under_commitment", "Throughput under the commitment"


class UsageAlertRule(models.Model):
    """A condition over N consecutive complete hours of one token-SLA contract's rollups (or of
    every token-SLA contract the organization is a party of).

    threshold: ttft_p95_over_slo — milliseconds (empty: the contract's SLO); error_rate_over —
    percent of served requests that timed out or failed; throughput_under_commitment — percent of
    the committed tokens per second (empty: 100).
    """

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="usage_alert_rules"
    )
    contract = models.ForeignKey(
        Contract,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="usage_alert_rules",
        help_text="One token-SLA contract of the organization (its subscription); empty: all.",
    )
    kind = models.CharField(max_length=32, choices=UsageAlertKind.choices)
    hours = models.PositiveSmallIntegerField(default=1)
    threshold = models.DecimalField(max_digits=12, decimal_places=3, null=True, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(hours__gte=1, hours__lte=168), name="usage_alert_hours_range"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=UsageAlertKind.values), name="usage_alert_kind_known"
            ),
            models.CheckConstraint(
                condition=(
                    Q(kind=UsageAlertKind.ERROR_RATE_OVER, threshold__gt=0, threshold__lte=100)
                    | Q(kind=UsageAlertKind.TTFT_P95_OVER_SLO)
                    & (Q(threshold__isnull=True) | Q(threshold__gt=0))
                    | Q(kind=UsageAlertKind.THROUGHPUT_UNDER_COMMITMENT)
                    & (Q(threshold__isnull=True) | Q(threshold__gt=0, threshold__lte=100))
                ),
                name="usage_alert_threshold_fits_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} for {self.hours} h ({self.organization})"


class UsageAlert(models.Model):
    """One firing of a rule on one contract: a run of breaching hours, keyed by its first hour,
    so a condition that lasts is reported once."""

    rule = models.ForeignKey(UsageAlertRule, on_delete=models.CASCADE, related_name="alerts")
    contract = models.ForeignKey(Contract, on_delete=models.PROTECT, related_name="usage_alerts")
    first_hour = models.DateTimeField(help_text="Start of the first breaching hour of the run.")
    last_hour = models.DateTimeField(help_text="Start of the last breaching hour when it fired.")
    fired_at = models.DateTimeField()
    values = models.JSONField(help_text="The measured value of each hour of the run.")
    limit = models.DecimalField(max_digits=14, decimal_places=3)
    explanation = models.TextField()

    class Meta:
        ordering = ["-fired_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "contract", "first_hour"], name="usage_alert_once_per_run"
            ),
            models.CheckConstraint(
                condition=Q(last_hour__gte=F("first_hour")), name="usage_alert_hours_order"
            ),
        ]

    def __str__(self) -> str:
        return f"rule {self.rule_id} on {self.contract_id} from {self.first_hour:%Y-%m-%d %H:00}"
