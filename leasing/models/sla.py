"""SLA offerings (inference sold by the token under SLOs) and the contracts subscribed to them."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from accounts.models import Organization
from contracts.models import Contract
from core.fields import currency_field, currency_is_iso, rate_field
from core.history import audit_history
from core.tags import tags_check, tags_field
from inventory.models import Node
from leasing.choices import (
    OfferStatus,
)


def _token_tier_checks(prefix: str) -> list[models.CheckConstraint]:
    """Cached and batch prices are not negative; a batch tier has both prices and a deadline."""
    return [
        models.CheckConstraint(
            condition=(
                Q(price_per_million_cached_input_tokens__isnull=True)
                | Q(price_per_million_cached_input_tokens__gte=0)
            )
            & (
                Q(batch_price_per_million_input_tokens__isnull=True)
                | Q(batch_price_per_million_input_tokens__gte=0)
            )
            & (
                Q(batch_price_per_million_output_tokens__isnull=True)
                | Q(batch_price_per_million_output_tokens__gte=0)
            ),
            name=f"{prefix}_tier_prices_not_negative",
        ),
        models.CheckConstraint(
            condition=Q(
                batch_price_per_million_input_tokens__isnull=True,
                batch_price_per_million_output_tokens__isnull=True,
                batch_completion_hours__isnull=True,
            )
            | Q(
                # isnull=False spelled out: a NULL hours would make `> 0` unknown, which a CHECK
                # lets through.
                batch_price_per_million_input_tokens__isnull=False,
                batch_price_per_million_output_tokens__isnull=False,
                batch_completion_hours__isnull=False,
                batch_completion_hours__gt=0,
            ),
            name=f"{prefix}_batch_tier_complete",
        ),
    ]


class SlaOffering(models.Model):
    """Inference sold by the token under latency and availability SLOs, backed by nodes."""

    provider = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="sla_offerings"
    )
    served_model_name = models.CharField(max_length=120)
    price_per_million_input_tokens = rate_field()
    price_per_million_output_tokens = rate_field()
    price_per_million_cached_input_tokens = rate_field(
        null=True,
        blank=True,
        help_text="Input tokens served from the prompt cache; empty: billed as ordinary input.",
    )
    batch_price_per_million_input_tokens = rate_field(
        null=True, blank=True, help_text="Batch tier; empty: no batch tier."
    )
    batch_price_per_million_output_tokens = rate_field(null=True, blank=True)
    batch_completion_hours = models.PositiveIntegerField(
        null=True, blank=True, help_text="A batch request is completed within this many hours."
    )
    currency = currency_field()
    availability_slo_pct = models.DecimalField(max_digits=6, decimal_places=3)
    ttft_p95_ms = models.PositiveIntegerField()
    tpot_p99_ms = models.PositiveIntegerField()
    committed_tokens_per_s = models.PositiveIntegerField()
    nodes = models.ManyToManyField(Node, blank=True, related_name="sla_offerings")
    contract_template = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=16, choices=OfferStatus.choices, default=OfferStatus.PUBLISHED
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = audit_history()

    class Meta:
        ordering = ["id"]
        verbose_name = "SLA offering"
        constraints = [
            models.CheckConstraint(
                condition=Q(price_per_million_input_tokens__gte=0)
                & Q(price_per_million_output_tokens__gte=0),
                name="sla_offering_prices_not_negative",
            ),
            *_token_tier_checks("sla_offering"),
            models.CheckConstraint(
                condition=Q(availability_slo_pct__gt=0) & Q(availability_slo_pct__lte=100),
                name="sla_offering_availability_range",
            ),
            currency_is_iso("sla_offering_currency_iso"),
        ]

    def __str__(self) -> str:
        return f"{self.served_model_name} ({self.provider})"


class SlaSubscription(models.Model):
    """A token-SLA contract's link to the SLA offering it buys from (one offering per contract)."""

    offering = models.ForeignKey(
        SlaOffering, on_delete=models.PROTECT, related_name="subscriptions"
    )
    contract = models.OneToOneField(
        Contract, on_delete=models.PROTECT, related_name="sla_subscription"
    )
    # The offering's cached-input and batch prices, frozen when the contract subscribed (as the
    # contract freezes its input and output rates): later changes to the offering bill nothing.
    price_per_million_cached_input_tokens = rate_field(null=True, blank=True)
    batch_price_per_million_input_tokens = rate_field(null=True, blank=True)
    batch_price_per_million_output_tokens = rate_field(null=True, blank=True)
    batch_completion_hours = models.PositiveIntegerField(null=True, blank=True)
    tags = tags_field()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        verbose_name = "SLA subscription"
        constraints = [
            *_token_tier_checks("sla_subscription"),
            tags_check("tags", "sla_subscription_tags_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.contract.number} → {self.offering.served_model_name}"
