"""Serializers of POST /api/v1/sizing/: the question (shape only) and the answer.

The rules (positive counts, KV heads that divide the heads, a context the model supports,
pricing terms) live in inventory.rules and leasing.sizing and answer with their own codes; the
serializers check types, choices, unknown fields and column-sized bounds only.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.fields import CurrencyField, DecimalString
from core.api.serializers import StrictInputSerializer
from inventory.choices import AttentionKind, Precision
from leasing.choices import PricingMode

_BIG = 2**63 - 1
_INT = 2**31 - 1


class ArchitectureInputSerializer(StrictInputSerializer):
    """A model not in the catalogue: the figures sizing reads (config.json names in brackets)."""

    parameters = serializers.IntegerField(max_value=_BIG, help_text="All parameters (experts).")
    active_parameters = serializers.IntegerField(
        max_value=_BIG, required=False, allow_null=True, help_text="Default: parameters (dense)."
    )
    layers = serializers.IntegerField(max_value=_INT, help_text="num_hidden_layers.")
    attention_heads = serializers.IntegerField(max_value=_INT, help_text="num_attention_heads.")
    kv_heads = serializers.IntegerField(max_value=_INT, help_text="num_key_value_heads.")
    head_dim = serializers.IntegerField(max_value=_INT)
    attention = serializers.ChoiceField(choices=AttentionKind.choices, default=AttentionKind.GQA)
    kv_latent_dim = serializers.IntegerField(
        max_value=_INT,
        required=False,
        allow_null=True,
        help_text="MLA only: numbers cached per token and layer (kv_lora_rank + rope dim).",
    )
    max_context_tokens = serializers.IntegerField(max_value=_INT, required=False, allow_null=True)


class SizingRequestSerializer(StrictInputSerializer):
    """POST /api/v1/sizing/: a catalogue model or an architecture, and the workload."""

    model = serializers.CharField(
        max_length=64, required=False, help_text="Catalogue slug (GET /api/v1/llm-models/)."
    )
    architecture = ArchitectureInputSerializer(required=False)
    weight_precision = serializers.ChoiceField(
        choices=Precision.choices,
        required=False,
        help_text="Default: the model's own precision (bf16 for an explicit architecture).",
    )
    kv_cache_precision = serializers.ChoiceField(choices=Precision.choices, default="bf16")
    # No min_value: the rules answer zero or negative counts with their own codes.
    context_tokens = serializers.IntegerField(
        max_value=_INT, help_text="Tokens of context each sequence holds (prompt + output)."
    )
    concurrency = serializers.IntegerField(
        max_value=_INT, help_text="Sequences one replica serves at once."
    )
    max_gpus_per_node = serializers.IntegerField(
        max_value=_INT, default=8, help_text="Largest tensor-parallel group (GPUs of one node)."
    )
    pricing_mode = serializers.ChoiceField(
        choices=PricingMode.choices, default=PricingMode.ON_DEMAND
    )
    term_months = serializers.IntegerField(
        max_value=_INT, required=False, help_text="Reserved pricing only."
    )
    currency = CurrencyField(default="USD", help_text="Only offers in this currency.")


class _ExplainedBytes(serializers.Serializer[Any]):
    bytes = serializers.IntegerField()
    explanation = serializers.CharField()


class _KvCacheSerializer(_ExplainedBytes):
    bytes_per_token = serializers.IntegerField()


class _CapacitySerializer(serializers.Serializer[Any]):
    offer_id = serializers.IntegerField()
    offer_name = serializers.CharField()
    provider = serializers.CharField(help_text="Provider slug.")
    site = serializers.CharField()
    country = serializers.CharField()
    city = serializers.CharField()
    price_per_gpu_hour = DecimalString()
    price_per_month = DecimalString(help_text="price_per_gpu_hour x GPUs x 730 h.")
    currency = serializers.CharField()
    max_free_gpus_on_one_node = serializers.IntegerField()


class _DecodeSerializer(serializers.Serializer[Any]):
    tokens_per_second_upper_bound = DecimalString(help_text="The replica, all sequences.")
    tokens_per_second_per_sequence_upper_bound = DecimalString()
    explanation = serializers.CharField()


class _FitSerializer(serializers.Serializer[Any]):
    gpu_model = serializers.CharField()
    gpu_model_name = serializers.CharField()
    gpus_per_node = serializers.IntegerField(help_text="Tensor-parallel degree, one node.")
    memory_bytes_per_gpu = serializers.IntegerField()
    weight_bytes_per_gpu = serializers.IntegerField()
    kv_cache_bytes_per_gpu = serializers.IntegerField()
    overhead_bytes_per_gpu = serializers.IntegerField()
    needed_bytes_per_gpu = serializers.IntegerField()
    headroom_bytes_per_gpu = serializers.IntegerField()
    memory_explanation = serializers.CharField()
    decode = _DecodeSerializer()
    capacity = _CapacitySerializer(allow_null=True)
    capacity_explanation = serializers.CharField()


class _NoFitSerializer(serializers.Serializer[Any]):
    gpu_model = serializers.CharField()
    reason = serializers.CharField()


class _WindowSerializer(serializers.Serializer[Any]):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class SizingAnswerSerializer(serializers.Serializer[Any]):
    """The sizing answer: demand, overhead rule, the fits cheapest first, and the misses."""

    model = serializers.CharField(allow_null=True, help_text="Catalogue slug, or null.")
    architecture = serializers.DictField()
    workload = serializers.DictField()
    weights = _ExplainedBytes()
    kv_cache = _KvCacheSerializer()
    overhead_rule = serializers.CharField()
    verdict = serializers.ChoiceField(choices=["fits", "no_fit"])
    explanation = serializers.CharField()
    fits = _FitSerializer(many=True)
    no_fit = _NoFitSerializer(many=True)
    skipped_tensor_parallel_degrees = serializers.ListField(child=serializers.CharField())
    capacity_window = _WindowSerializer()
