"""Serializers of customer funds: credit grants, top-ups, burn-downs and funds policies.

Stored amounts answer at their currency's minor unit (core.api.fields.MinorUnitMixin).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.models import Organization
from billing.models import CreditGrant, FundsAction, FundsPolicy, GrantScope, TopUp
from billing.selectors.funds import BurnDown, burn_downs
from core.api.fields import CurrencyField, MinorUnitMixin
from core.api.serializers import StrictInputSerializer
from core.money import round_money


class CreditGrantSerializer(MinorUnitMixin, serializers.ModelSerializer[CreditGrant]):
    """A grant on a customer's prepaid balance and what is left of it (`remaining`)."""

    money_fields = ("amount", "expired_amount")

    remaining = serializers.SerializerMethodField(
        help_text="What is left on the grant's sub-ledger, at the currency's minor unit."
    )
    top_up = serializers.IntegerField(source="top_up.pk", read_only=True, allow_null=True)

    class Meta:
        model = CreditGrant
        fields = [
            "id",
            "customer",
            "currency",
            "kind",
            "amount",
            "remaining",
            "priority",
            "applies_to",
            "granted_at",
            "expires_at",
            "expired_at",
            "expired_amount",
            "reason",
            "vouched_by",
            "top_up",
        ]
        read_only_fields = fields

    def get_remaining(self, grant: CreditGrant) -> str:
        """From the queryset's annotation (the sub-ledger's trigger-kept balance)."""
        balance = getattr(grant, "subledger_balance", None) or Decimal(0)
        return str(round_money(-balance, grant.currency))


class CreditGrantCreateSerializer(StrictInputSerializer):
    """An operator's promotional grant."""

    customer = serializers.IntegerField(help_text="The customer organization's id.")
    currency = CurrencyField()
    amount = serializers.DecimalField(max_digits=20, decimal_places=4)
    priority = serializers.IntegerField(min_value=0, max_value=32767, required=False)
    applies_to = serializers.ChoiceField(choices=GrantScope.choices, default=GrantScope.ANYTHING)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)
    reason = serializers.CharField(max_length=2000)


class TopUpSerializer(MinorUnitMixin, serializers.ModelSerializer[TopUp]):
    """A top-up: how the money came, its state, and the grant it became."""

    money_fields = ("amount",)

    class Meta:
        model = TopUp
        fields = [
            "id",
            "customer",
            "currency",
            "amount",
            "method",
            "status",
            "payment_method",
            "stripe_payment_intent_id",
            "reference",
            "vouched_by",
            "requested_at",
            "settled_at",
            "failure_message",
            "grant",
        ]
        read_only_fields = fields


class TopUpCreateSerializer(StrictInputSerializer):
    """A customer pays by card (`payment_method`); an operator records a payment (`customer`,
    `reference`)."""

    currency = CurrencyField()
    amount = serializers.DecimalField(max_digits=20, decimal_places=4)
    payment_method = serializers.CharField(max_length=64, required=False)
    customer = serializers.IntegerField(required=False, help_text="Operators only.")
    reference = serializers.CharField(max_length=200, required=False, help_text="Operators only.")


class BurnDownSerializer(serializers.Serializer[Any]):
    """A customer's prepaid balance in one currency and the date it runs out."""

    customer = serializers.IntegerField(source="customer_id")
    currency = serializers.CharField()
    balance = serializers.DecimalField(max_digits=20, decimal_places=4)
    unbilled = serializers.DecimalField(max_digits=20, decimal_places=4)
    daily_burn = serializers.DecimalField(max_digits=20, decimal_places=4)
    days_left = serializers.DecimalField(max_digits=12, decimal_places=2, allow_null=True)
    runs_out_at = serializers.DateTimeField(allow_null=True)
    as_of = serializers.DateTimeField()
    explanation = serializers.CharField()


class _BurnDownListSerializer(serializers.ListSerializer[Organization]):
    """A page of customers: their burn-downs read together, in a fixed number of queries."""

    burn_downs: dict[int, list[BurnDown]] | None = None

    def to_representation(self, data: Any) -> list[Any]:
        customers = list(data.all() if hasattr(data, "all") else data)
        self.burn_downs = burn_downs(
            [customer.pk for customer in customers], now=self.context["now"]
        )
        return super().to_representation(customers)


class CustomerBurnDownSerializer(serializers.ModelSerializer[Organization]):
    """A customer and, per currency of its grants, when its prepaid balance runs out. The view
    puts `now` in the context."""

    currencies = serializers.SerializerMethodField()

    class Meta:
        model = Organization
        fields = ["id", "slug", "currencies"]
        read_only_fields = fields
        list_serializer_class = _BurnDownListSerializer

    @extend_schema_field(BurnDownSerializer(many=True))
    def get_currencies(self, customer: Organization) -> list[dict[str, Any]]:
        known = getattr(self.parent, "burn_downs", None)
        if known is None or customer.pk not in known:
            known = burn_downs([customer.pk], now=self.context["now"])
        return [dict(BurnDownSerializer(projection).data) for projection in known[customer.pk]]


class FundsPolicySerializer(serializers.ModelSerializer[FundsPolicy]):
    """A contract's funds policy and its last evaluation."""

    contract_number = serializers.CharField(source="contract.number", read_only=True)

    class Meta:
        model = FundsPolicy
        fields = [
            "id",
            "contract",
            "contract_number",
            "action",
            "threshold_days",
            "set_by",
            "triggered_at",
            "evaluated_at",
            "days_left",
            "updated_at",
        ]
        read_only_fields = fields


class FundsPolicySetSerializer(StrictInputSerializer):
    """Set a contract's funds policy (its lessee, or an operator)."""

    contract = serializers.IntegerField()
    action = serializers.ChoiceField(choices=FundsAction.choices)
    threshold_days = serializers.IntegerField()
