"""Serializers of the contracts API (shape only; rules live in services and the engine)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from contracts import engine
from contracts.choices import AcceptanceRunStatus, ClauseKind, EndReason, Party, PricingBasis
from contracts.models import AcceptanceRun, Clause, Contract, ContractEvent
from core.api.fields import CurrencyField, MoneyField, RateField, SlugOrBlankField
from core.api.serializers import StrictInputSerializer


class EventRefSerializer(serializers.ModelSerializer[ContractEvent]):
    """A contract event cited by an invoice line."""

    class Meta:
        model = ContractEvent
        fields = ["id", "kind", "effective_at", "explanation"]
        read_only_fields = fields


class ClauseSerializer(serializers.ModelSerializer[Clause]):
    """A clause: its kind and validated parameters."""

    class Meta:
        model = Clause
        fields = ["kind", "params"]


class ContractSerializer(serializers.ModelSerializer[Contract]):
    """A contract as both parties see it."""

    lessor = serializers.CharField(source="lessor.slug", read_only=True)
    lessee = serializers.CharField(source="lessee.slug", read_only=True)
    clauses = ClauseSerializer(many=True, read_only=True)
    # Blank until the contract ends / someone exits; declared because a read-only model field
    # loses `allow_blank`, and the schema then would not allow "".
    end_reason = serializers.ChoiceField(
        choices=EndReason.choices, allow_blank=True, read_only=True
    )
    exit_party = serializers.ChoiceField(choices=Party.choices, allow_blank=True, read_only=True)
    # A slug, or blank (token contracts lease no hardware model).
    leased_model_slug = SlugOrBlankField(
        read_only=True,
        help_text="GPU model (inventory catalog slug) being leased; blank if none.",
    )

    class Meta:
        model = Contract
        fields = [
            "id",
            "number",
            "version",
            "lessor",
            "lessee",
            "status",
            "end_reason",
            "ended_at",
            "term_start",
            "term_end",
            "currency",
            "billing_period",
            "billing_anchor_day",
            "pricing_basis",
            "leased_model_slug",
            "base_rate_per_gpu_hour",
            "rate_per_million_input_tokens",
            "rate_per_million_output_tokens",
            "reference_market_rate",
            "committed_gpus",
            "committed_tokens_per_s",
            "billing_start",
            "exit_party",
            "exit_effective_at",
            "provider_insolvency_flagged",
            "clauses",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class ContractCreateSerializer(StrictInputSerializer):
    """Input of an operator creating a contract."""

    lessor = serializers.SlugField()
    lessee = serializers.SlugField()
    term_start = serializers.DateTimeField()
    term_end = serializers.DateTimeField()
    currency = CurrencyField()
    pricing_basis = serializers.ChoiceField(choices=PricingBasis.choices)
    billing_anchor_day = serializers.IntegerField(min_value=1, max_value=28, default=1)
    leased_model_slug = SlugOrBlankField(required=False, default="")
    base_rate_per_gpu_hour = RateField(min_value=0, required=False, allow_null=True)
    rate_per_million_input_tokens = RateField(min_value=0, required=False, allow_null=True)
    rate_per_million_output_tokens = RateField(min_value=0, required=False, allow_null=True)
    reference_market_rate = RateField(min_value=0, required=False, allow_null=True)
    committed_gpus = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    committed_tokens_per_s = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    clauses = serializers.ListField(
        child=serializers.DictField(), required=False, default=list, max_length=len(ClauseKind)
    )


class ContractAmendSerializer(StrictInputSerializer):
    """Input of an amendment: any subset of the amendable terms, and optionally a new clause set."""

    term_end = serializers.DateTimeField(required=False)
    billing_anchor_day = serializers.IntegerField(min_value=1, max_value=28, required=False)
    leased_model_slug = SlugOrBlankField(required=False)
    base_rate_per_gpu_hour = RateField(min_value=0, required=False, allow_null=True)
    rate_per_million_input_tokens = RateField(min_value=0, required=False, allow_null=True)
    rate_per_million_output_tokens = RateField(min_value=0, required=False, allow_null=True)
    reference_market_rate = RateField(min_value=0, required=False, allow_null=True)
    committed_gpus = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    committed_tokens_per_s = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    clauses = serializers.ListField(
        child=serializers.DictField(), required=False, max_length=len(ClauseKind)
    )


class ContractEventSerializer(serializers.ModelSerializer[ContractEvent]):
    """One decision or transition, with its inputs and sentence."""

    class Meta:
        model = ContractEvent
        fields = [
            "id",
            "kind",
            "effective_at",
            "created_at",
            "actor",
            "from_status",
            "to_status",
            "amount",
            "currency",
            "rate",
            "explanation",
            "inputs",
        ]
        read_only_fields = fields


class ExitInputSerializer(StrictInputSerializer):
    """An exit date, and for operators the party on whose behalf they act."""

    exit_date = serializers.DateField()
    party = serializers.ChoiceField(choices=Party.choices, required=False)


class DecisionSerializer(serializers.Serializer[Any]):
    """An engine decision as shown in previews."""

    kind = serializers.CharField()
    effective_at = serializers.DateTimeField()
    explanation = serializers.CharField()
    amount = MoneyField(allow_null=True)
    currency = serializers.CharField(allow_null=True)
    inputs = serializers.DictField()


class TerminationQuoteSerializer(serializers.Serializer[Any]):
    """What an exit would cost, and why."""

    contract = serializers.CharField()
    party = serializers.CharField()
    exit_date = serializers.DateField()
    effective_end = serializers.DateTimeField()
    notice_end = serializers.DateTimeField()
    fee = MoneyField()
    currency = serializers.CharField()
    fee_free_reason = serializers.CharField(allow_null=True)
    data_migration_until = serializers.DateTimeField(allow_null=True)
    data_migration_party = serializers.CharField(allow_null=True)
    explanation = serializers.CharField()
    decisions = DecisionSerializer(many=True)


class AcceptanceRunInputSerializer(StrictInputSerializer):
    """A measured acceptance result submitted by a party."""

    metric = serializers.CharField(max_length=32)
    measured_value = serializers.DecimalField(max_digits=20, decimal_places=6, min_value=0)
    quality_delta_pct = serializers.DecimalField(
        max_digits=9, decimal_places=4, required=False, allow_null=True
    )
    report = serializers.DictField(required=False, default=dict)
    run_by = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    ran_at = serializers.DateTimeField(required=False)


class AcceptanceOutcomeSerializer(serializers.Serializer[Any]):
    """Where acceptance stands after a run: the run's status (a provider's run is a claim that
    decides nothing yet), the engine's verdict and when billing starts."""

    run_id = serializers.IntegerField()
    run_status = serializers.ChoiceField(choices=AcceptanceRunStatus.choices)
    passed = serializers.BooleanField(
        allow_null=True, help_text="The run's verdict; null while it decides nothing (a claim)."
    )
    claim_expires_at = serializers.DateTimeField(
        allow_null=True, help_text="A claim: until when the lessee may confirm or dispute it."
    )
    status = serializers.CharField(help_text="Acceptance: pending, failed_retry_allowed, ...")
    billing_start = serializers.DateTimeField(allow_null=True)
    explanation = serializers.CharField()
    contract_status = serializers.CharField()


def acceptance_outcome_data(
    *, run: AcceptanceRun, outcome: engine.AcceptanceOutcome, contract: Contract
) -> dict[str, Any]:
    """The body of AcceptanceOutcomeSerializer for a run just recorded, confirmed or decided."""
    return {
        "run_id": run.pk,
        "run_status": run.status,
        "passed": run.passed,
        "claim_expires_at": run.claim_expires_at,
        "status": outcome.status,
        "billing_start": contract.billing_start,
        "explanation": outcome.explanation,
        "contract_status": contract.status,
    }
