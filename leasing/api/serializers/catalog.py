"""Serializers of the catalog side of leasing: offers, SLA offerings, capacity and quotes.

Input serializers check shape and column limits only; the business rules (whose site, which
nodes, valid ladder and clauses) live in leasing.services and answer with stable codes.
Money is a decimal string next to a `currency` field (core.api.fields). The summaries of other
apps' rows (provider, site, GPU model) are those apps' Ref serializers.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounts.api.serializers import ProviderRefSerializer
from core.api.fields import CurrencyField, DecimalString, MinorUnitMixin, RateField
from core.api.serializers import StrictInputSerializer
from inventory.api.serializers import GpuModelRefSerializer, SiteRefSerializer
from leasing.api.serializers.resale import ResaleOfferSerializer
from leasing.choices import OfferStatus, PriceUnit, PricingMode
from leasing.models import Offer, Quote, SlaOffering
from leasing.services.offer_rules import OFFER_FIELDS, SLA_OFFERING_FIELDS


class OfferSerializer(serializers.ModelSerializer[Offer]):
    """An offer as everyone reads it."""

    provider = ProviderRefSerializer(read_only=True)
    site = SiteRefSerializer(read_only=True)
    gpu_model = GpuModelRefSerializer(read_only=True)
    nodes = serializers.SerializerMethodField(
        help_text="Named nodes; empty means every node of the model at the site."
    )
    price_per_gpu_hour = DecimalString()
    price_per_node_month = DecimalString(allow_null=True)
    interruptible_price_per_gpu_hour = DecimalString(allow_null=True)
    # Declared, not derived from the JSON column: a derived field documents `oneOf: [{}, null]`,
    # which null satisfies twice (tests/fuzz caught it); this is an object or null.
    index_linked_terms = serializers.DictField(
        read_only=True,
        allow_null=True,
        help_text=Offer._meta.get_field("index_linked_terms").help_text,
    )

    class Meta:
        model = Offer
        # The terms a provider sets are OFFER_FIELDS, one list for the API, the admin and the
        # offer services.
        fields = ["id", "provider", "site", "gpu_model", "nodes", *OFFER_FIELDS]
        fields += ["created_at", "updated_at"]
        read_only_fields = fields

    def get_nodes(self, offer: Offer) -> list[int]:
        # Prefetched by the selector: no query per offer.
        return [node.pk for node in offer.nodes.all()]


class _OfferTermsSerializer(StrictInputSerializer):
    """The terms of an offer a provider sets."""

    name = serializers.CharField(max_length=120)
    price_per_gpu_hour = RateField()
    price_unit = serializers.ChoiceField(
        choices=PriceUnit.choices,
        required=False,
        help_text="node_month: leases take whole nodes at price_per_node_month.",
    )
    price_per_node_month = RateField(
        required=False, allow_null=True, help_text="Monthly rent of one whole node."
    )
    currency = CurrencyField(help_text="ISO-4217, e.g. USD.")
    reserved_ladder = serializers.DictField(
        required=False, help_text='Term months → discount %, e.g. {"1": "5", "12": "25"}.'
    )
    interruptible_price_per_gpu_hour = RateField(required=False, allow_null=True)
    preemption_notice_minutes = serializers.IntegerField(
        required=False, min_value=0, max_value=10080
    )
    min_term_hours = serializers.IntegerField(required=False, min_value=1, max_value=87840)
    available_from = serializers.DateTimeField(required=False)
    available_until = serializers.DateTimeField(required=False, allow_null=True)
    contract_template = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Clauses every lease gets."
    )
    index_linked_terms = serializers.DictField(
        required=False,
        allow_null=True,
        help_text="The index-linked option (spread_type, spread, floor_rate, cap_rate, "
        "reset_months, fixing_day); null: fixed prices only.",
    )
    status = serializers.ChoiceField(choices=OfferStatus.choices, required=False)
    site = serializers.IntegerField(help_text="One of your sites.")
    gpu_model = serializers.CharField(max_length=64, help_text="Catalog slug, e.g. h200-sxm.")
    nodes = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        max_length=10000,
        help_text="Node ids at the site with the model; empty: every such node.",
    )


class OfferCreateSerializer(_OfferTermsSerializer):
    """POST /api/v1/offers/ (operators add `provider`, a provider slug)."""

    provider = serializers.SlugField(required=False, help_text="Operators only.")


class OfferUpdateSerializer(_OfferTermsSerializer):
    """PATCH /api/v1/offers/{id}/: any subset of the terms; `status` pauses or publishes."""


# ------------------------------------------------------------------ SLA offerings


class SlaOfferingSerializer(serializers.ModelSerializer[SlaOffering]):
    """An SLA offering as everyone reads it."""

    provider = ProviderRefSerializer(read_only=True)
    nodes = serializers.SerializerMethodField()
    price_per_million_input_tokens = DecimalString()
    price_per_million_output_tokens = DecimalString()
    price_per_million_cached_input_tokens = DecimalString(allow_null=True)
    batch_price_per_million_input_tokens = DecimalString(allow_null=True)
    batch_price_per_million_output_tokens = DecimalString(allow_null=True)
    availability_slo_pct = DecimalString()

    class Meta:
        model = SlaOffering
        fields = ["id", "provider", "nodes", *SLA_OFFERING_FIELDS, "created_at", "updated_at"]
        read_only_fields = fields

    def get_nodes(self, offering: SlaOffering) -> list[int]:
        return [node.pk for node in offering.nodes.all()]


class _SlaTermsSerializer(StrictInputSerializer):
    """The terms of an SLA offering a provider sets."""

    served_model_name = serializers.CharField(max_length=120)
    price_per_million_input_tokens = RateField()
    price_per_million_output_tokens = RateField()
    price_per_million_cached_input_tokens = RateField(
        required=False, allow_null=True, help_text="Prompt-cache hits; null: billed as input."
    )
    batch_price_per_million_input_tokens = RateField(
        required=False, allow_null=True, help_text="Batch tier (with the output price and hours)."
    )
    batch_price_per_million_output_tokens = RateField(required=False, allow_null=True)
    batch_completion_hours = serializers.IntegerField(
        min_value=1, max_value=8760, required=False, allow_null=True
    )
    currency = CurrencyField()
    availability_slo_pct = serializers.DecimalField(max_digits=6, decimal_places=3)
    ttft_p95_ms = serializers.IntegerField(min_value=0, max_value=2147483647)
    tpot_p99_ms = serializers.IntegerField(min_value=0, max_value=2147483647)
    committed_tokens_per_s = serializers.IntegerField(min_value=0, max_value=2147483647)
    nodes = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=10000
    )
    contract_template = serializers.ListField(child=serializers.DictField(), required=False)
    status = serializers.ChoiceField(choices=OfferStatus.choices, required=False)


class SlaOfferingCreateSerializer(_SlaTermsSerializer):
    """POST /api/v1/sla-offerings/ (operators add `provider`)."""

    provider = serializers.SlugField(required=False, help_text="Operators only.")


class SlaOfferingUpdateSerializer(_SlaTermsSerializer):
    """PATCH /api/v1/sla-offerings/{id}/."""


# ------------------------------------------------------------------ capacity search


class _CapacityOfferSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="offer_id")
    name = serializers.CharField(source="offer_name")


class _CapacityProviderSerializer(serializers.Serializer[Any]):
    slug = serializers.CharField(source="provider_slug")
    name = serializers.CharField(source="provider_name")


class _CapacitySiteSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="site_id")
    name = serializers.CharField(source="site_name")
    country = serializers.CharField()
    city = serializers.CharField()
    region = serializers.CharField()


class _CapacityModelSerializer(serializers.Serializer[Any]):
    slug = serializers.CharField(source="gpu_model_slug")
    name = serializers.CharField(source="gpu_model_name")
    vendor = serializers.CharField()
    generation = serializers.CharField()
    memory_gb = serializers.IntegerField()
    memory_bandwidth_tbps = DecimalString()
    dense_bf16_tflops = DecimalString()


class _CapacityPoolSerializer(serializers.Serializer[Any]):
    nodes = serializers.IntegerField(source="pool_nodes", help_text="Serving nodes in the pool.")
    gpus = serializers.IntegerField(source="pool_gpus", help_text="All GPUs of those nodes.")
    nodes_with_free_gpus = serializers.IntegerField()


class CapacityResultSerializer(serializers.Serializer[Any]):
    """One offer's pool: GPUs free for the whole window, price for the term, reliability."""

    offer = _CapacityOfferSerializer(source="*")
    provider = _CapacityProviderSerializer(source="*")
    site = _CapacitySiteSerializer(source="*")
    gpu_model = _CapacityModelSerializer(source="*")
    pool = _CapacityPoolSerializer(source="*")
    free_gpus = serializers.IntegerField(help_text="Free for the whole window, across the pool.")
    max_free_gpus_on_one_node = serializers.IntegerField()
    pricing_mode = serializers.CharField()
    term_months = serializers.IntegerField(allow_null=True)
    price_per_gpu_hour = DecimalString(help_text="Effective rate for the pricing mode and term.")
    currency = serializers.CharField()
    priced_gpu_count = serializers.IntegerField(help_text="min_gpus, or 1.")
    window_gpu_hours = DecimalString()
    total_for_window = DecimalString(help_text="priced_gpu_count GPUs for the whole window.")
    price_explanation = serializers.CharField()
    price_per_tflops_hour = DecimalString(help_text="price_per_gpu_hour / dense BF16 TFLOPS.")
    memory_bandwidth_tbps_per_price_unit = DecimalString(
        help_text="Memory TB/s per currency unit per GPU-hour (bandwidth per dollar)."
    )
    reliability_pct = DecimalString(help_text="Measured availability over the last 90 days.")
    min_term_hours = serializers.IntegerField()
    preemption_notice_minutes = serializers.IntegerField(allow_null=True)
    index_linked = serializers.DictField(
        allow_null=True,
        help_text="The index-linked option beside the fixed price (current marketplace fixing, "
        "spread, floor, cap and the rate it gives now); null when the offer has none.",
    )


class _WindowSerializer(serializers.Serializer[Any]):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class CapacityPageSerializer(serializers.Serializer[Any]):
    """A page of capacity: limit/offset paging because the order is computed per request."""

    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    window = _WindowSerializer()
    pricing_mode = serializers.CharField()
    term_months = serializers.IntegerField(allow_null=True)
    results = CapacityResultSerializer(many=True)
    resale = ResaleOfferSerializer(
        many=True,
        help_text="Open resale listings covering the whole window (offer_type resale), apart "
        "from `results` and not counted in `count`; buy one at /resale-listings/{id}/buy/.",
    )


# ------------------------------------------------------------------ quotes


class QuoteRequestSerializer(StrictInputSerializer):
    """POST /api/v1/quotes/: what to price. The window is end, hours, or (reserved) a term."""

    gpu_model = serializers.CharField(max_length=64)
    # No min_value: the service answers zero or negative counts with its own code.
    gpu_count = serializers.IntegerField(max_value=100000)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(required=False)
    hours = serializers.DecimalField(max_digits=12, decimal_places=4, required=False)
    term_months = serializers.IntegerField(required=False, max_value=100000)
    pricing_mode = serializers.ChoiceField(
        choices=PricingMode.choices, default=PricingMode.ON_DEMAND
    )
    country = serializers.RegexField(r"^[A-Za-z]{2}$", required=False)
    max_price_per_gpu_hour = RateField(required=False)
    currency = CurrencyField(
        required=False,
        help_text="Only offers in this currency; the price cap is in it (default USD).",
    )


class QuoteSerializer(MinorUnitMixin, serializers.ModelSerializer[Quote]):
    """A stored quote: the offer, price breakdown, contract terms and expiry."""

    money_fields = ("total",)

    offer = serializers.SerializerMethodField()
    provider = ProviderRefSerializer(source="offer.provider", read_only=True)
    site = SiteRefSerializer(source="offer.site", read_only=True)
    gpu_model = GpuModelRefSerializer(source="offer.gpu_model", read_only=True)
    price_per_gpu_hour = DecimalString()
    total = DecimalString()
    placement = serializers.SerializerMethodField()
    contract_terms = serializers.SerializerMethodField()
    expired = serializers.SerializerMethodField()

    class Meta:
        model = Quote
        fields = [
            "id",
            "offer",
            "provider",
            "site",
            "gpu_model",
            "gpu_count",
            "start",
            "end",
            "pricing_mode",
            "term_months",
            "price_per_gpu_hour",
            "total",
            "currency",
            "placement",
            "breakdown",
            "contract_terms",
            "free_gpus_at_quote",
            "expires_at",
            "expired",
            "created_at",
        ]
        read_only_fields = fields

    def get_offer(self, quote: Quote) -> dict[str, Any]:
        return {"id": quote.offer_id, "name": quote.offer.name}

    def get_placement(self, quote: Quote) -> str | None:
        placement = quote.breakdown.get("placement")
        return str(placement) if placement is not None else None

    def get_contract_terms(self, quote: Quote) -> list[Any]:
        terms = quote.breakdown.get("contract_terms", [])
        return list(terms) if isinstance(terms, list) else []

    def get_expired(self, quote: Quote) -> bool:
        now = self.context.get("now")
        return bool(now is not None and quote.expires_at <= now)


class QuoteBatchSerializer(serializers.Serializer[Any]):
    """The answer to a quote request: up to three quotes, cheapest first."""

    quotes = QuoteSerializer(many=True)
    resale = ResaleOfferSerializer(
        many=True,
        help_text="Open resale listings covering the quoted window (offer_type resale); "
        "with no ordinary capacity they answer alone (`quotes` empty).",
    )
