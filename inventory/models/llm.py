"""The model catalogue: open language models with the architecture figures sizing reads."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Mod
from django.db.models.lookups import Exact

from core.history import audit_history
from inventory.choices import AttentionKind, Precision

# The architecture figures of a catalogue model, in the order the API and the admin form show
# them; LLM_FIELDS is every field a client or operator writes (the API adds the id).
LLM_FIGURES = (
    "parameters",
    "active_parameters",
    "experts",
    "experts_per_token",
    "layers",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "attention",
    "kv_latent_dim",
    "default_precision",
    "max_context_tokens",
)
LLM_FIELDS = ("slug", "name", "publisher", *LLM_FIGURES, "source_url", "spec_sources")


class LlmModel(models.Model):
    """One open language model: parameter counts, attention shape, precision and context, each
    figure with its source (the model card or config.json on Hugging Face)."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=100, unique=True)
    publisher = models.CharField(max_length=60, help_text="Meta, Qwen, DeepSeek, Mistral AI, …")
    parameters = models.PositiveBigIntegerField(
        help_text="Every parameter the weights hold (all experts of a mixture of experts)."
    )
    active_parameters = models.PositiveBigIntegerField(
        help_text="Parameters one token reads: the total for a dense model, fewer for a MoE."
    )
    experts = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Routed experts per MoE layer; empty for dense models."
    )
    experts_per_token = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Routed experts each token uses; empty for dense models."
    )
    layers = models.PositiveIntegerField(help_text="Transformer blocks (num_hidden_layers).")
    attention_heads = models.PositiveIntegerField(help_text="Query heads (num_attention_heads).")
    kv_heads = models.PositiveIntegerField(
        help_text="Key/value heads (num_key_value_heads); divides the attention heads."
    )
    head_dim = models.PositiveIntegerField(help_text="Dimension of one attention head.")
    attention = models.CharField(
        max_length=8, choices=AttentionKind.choices, default=AttentionKind.GQA
    )
    kv_latent_dim = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="MLA only: numbers cached per token and layer (kv_lora_rank + qk_rope_head_dim).",
    )
    default_precision = models.CharField(
        max_length=8,
        choices=Precision.choices,
        help_text="The precision the publisher ships the weights in.",
    )
    max_context_tokens = models.PositiveIntegerField(
        help_text="The longest context the publisher supports, in tokens."
    )
    source_url = models.URLField(
        max_length=300, help_text="The model card or config.json the figures come from."
    )
    spec_sources = models.JSONField(
        default=dict, blank=True, help_text="Where each figure comes from, by field name."
    )
    history = audit_history()

    class Meta:
        ordering = ["publisher", "name"]
        verbose_name = "LLM model"
        constraints = [
            models.CheckConstraint(
                condition=Q(parameters__gt=0)
                & Q(active_parameters__gt=0)
                & Q(layers__gt=0)
                & Q(attention_heads__gt=0)
                & Q(kv_heads__gt=0)
                & Q(head_dim__gt=0)
                & Q(max_context_tokens__gt=0),
                name="llm_model_figures_positive",
            ),
            models.CheckConstraint(
                condition=Q(active_parameters__lte=F("parameters")),
                name="llm_model_active_within_total",
            ),
            # Dividing implies kv_heads <= attention_heads: both are positive.
            models.CheckConstraint(
                condition=Exact(Mod(F("attention_heads"), F("kv_heads")), 0),
                name="llm_model_kv_heads_divide_heads",
            ),
            models.CheckConstraint(
                condition=Q(
                    attention=AttentionKind.MLA, kv_latent_dim__isnull=False, kv_latent_dim__gt=0
                )
                | Q(attention=AttentionKind.GQA, kv_latent_dim__isnull=True),
                name="llm_model_latent_only_for_mla",
            ),
            models.CheckConstraint(
                condition=Q(experts__isnull=True, experts_per_token__isnull=True)
                # The isnull tests matter: a comparison with NULL would let the row pass.
                | Q(
                    experts__isnull=False,
                    experts_per_token__isnull=False,
                    experts_per_token__gt=0,
                    experts__gte=F("experts_per_token"),
                ),
                name="llm_model_experts_pair",
            ),
            models.CheckConstraint(
                condition=Q(default_precision__in=Precision.values),
                name="llm_model_precision_known",
            ),
        ]

    def __str__(self) -> str:
        return self.name
